//! `sealer`: native batch sealer for sealfleet.
//!
//! Exit codes: the table in `contracts/exit-codes.json` (0 success, 1 internal error, 2 invalid
//! input, 3 storage / I/O failure, 4 no SHA-NI, 5 verify-pc1 mismatches, 6 parent cache missing
//! or corrupt, 7 data that is not its pieces, 8 the GPU engine's device missing or failed).

use clap::{Parser, Subcommand};
use sealer_config::{BatchConfig, Layout};
use sealer_pc1::{Pc1Error, Pc1Options};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "sealer", version, about = "sealfleet native batch sealer (PC1, PC2 on the CPU or an OpenCL device)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Label every layer of every sector of the batch (resumes after the last finished layer).
    Pc1 {
        /// Batch config (JSON).
        #[arg(long)]
        config: PathBuf,
        /// Accept the slow portable SHA-256 kernel when the CPU lacks SHA-NI.
        #[arg(long)]
        allow_portable_hash: bool,
        /// Ignore saved progress and start again from layer 1.
        #[arg(long)]
        restart: bool,
        /// Do not pin threads to the layout's CPUs.
        #[arg(long)]
        no_pin: bool,
        /// No progress bar on the terminal.
        #[arg(long)]
        quiet: bool,
        /// Node-cache budget in MiB.
        #[arg(long, default_value_t = 1024)]
        cache_mib: u64,
        /// Memory in MiB for the resident part of the previous layer (read sequentially at each
        /// layer's start; expander parents in it need no random read). 0: none.
        #[arg(long, default_value_t = 0)]
        resident_mib: u64,
    },
    /// PC2 for a batch whose PC1 is complete: tree-c, tree-r-last, replica, p_aux/t_aux, results.json.
    Pc2 {
        /// Batch config (JSON).
        #[arg(long)]
        config: PathBuf,
        /// Do not copy the layer files into each cache dir (rust-fil-proofs C1 needs them).
        #[arg(long)]
        no_layer_files: bool,
        /// Also write the summary here (Kubernetes termination message; env SEALER_TERMINATION_LOG).
        #[arg(long, env = "SEALER_TERMINATION_LOG")]
        termination_log: Option<PathBuf>,
    },
    /// PC1 then PC2 (both resumable).
    Batch {
        /// Batch config (JSON).
        #[arg(long)]
        config: PathBuf,
        /// Accept the slow portable SHA-256 kernel when the CPU lacks SHA-NI.
        #[arg(long)]
        allow_portable_hash: bool,
        /// Do not pin threads to the layout's CPUs.
        #[arg(long)]
        no_pin: bool,
        /// No progress bar on the terminal.
        #[arg(long)]
        quiet: bool,
        /// Do not copy the layer files into each cache dir.
        #[arg(long)]
        no_layer_files: bool,
        /// Also write the summary here (Kubernetes termination message; env SEALER_TERMINATION_LOG).
        #[arg(long, env = "SEALER_TERMINATION_LOG")]
        termination_log: Option<PathBuf>,
    },
    /// Recompute K random labels from their parents as stored and compare.
    VerifyPc1 {
        /// Batch config (JSON).
        #[arg(long)]
        config: PathBuf,
        /// Number of (layer, node) samples; each checks every sector.
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        /// RNG seed (default: time based).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Write each sector's layers as rust-fil-proofs files DIR/<sector_id>/sc-02-data-layer-<n>.dat.
    LayerExport {
        /// Batch config (JSON).
        #[arg(long)]
        config: PathBuf,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Build (or check) a graph's parent cache in a node's cache directory: keep it when its
    /// file matches its manifest's digest, else build it with storage-proofs-porep and record
    /// the digest. Sealer pods given that directory (`parent_cache_dir`) only read it.
    ParentCache {
        /// The registered proof whose graph it is, e.g. StackedDrg32GiBV1_1.
        #[arg(long)]
        proof: String,
        /// The node's cache directory.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Check a batch config against this machine without sealing (layout on the CPUs granted,
    /// parent cache, layer devices and sizes, hugepages, output space, data files) and print
    /// what the batch needs: slot, buffers, hugepages, parent cache, outputs, PC1 time and IOPS
    /// at a labelling rate. Exit 0 when ready, 2 when a check fails.
    /// Print what this binary and machine can run, as JSON: the PC2 engines (`gpu` only when an
    /// OpenCL device opens: the first GPU, or `SEALER_GPU_DEVICE`'s index) and every OpenCL
    /// device. The node agent publishes it in the node's SealerNode (the operator's source of
    /// truth for which engines a node's sealer image runs there).
    Capabilities {
        /// Also write the document to this file (atomically; the node agent reads it).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    Plan {
        /// Batch config (JSON).
        #[arg(long)]
        config: PathBuf,
        /// Labels per second per hasher thread to estimate PC1 time and IOPS with (measured by
        /// `sealer bench pc1`; about 1.0 M with SHA-NI on the 2-core EPYC in the README).
        #[arg(long, default_value_t = 1.0e6)]
        rate: f64,
        /// Node-cache budget in MiB (as `pc1 --cache-mib`).
        #[arg(long, default_value_t = 1024)]
        cache_mib: u64,
        /// Resident part of the previous layer in MiB (as `pc1 --resident-mib`).
        #[arg(long, default_value_t = 0)]
        resident_mib: u64,
        /// Estimate outputs without the layer files in each cache directory.
        #[arg(long)]
        no_layer_files: bool,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Print the CPU layout the sealer would use on this machine (calculator JSON).
    Calc {
        /// Batch size (power of two, 1..=128).
        #[arg(long, default_value_t = 32)]
        batch_size: usize,
        /// Take the batch size (and layout, if any) from this config instead.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Stage raw piece files into one data sector's file, as lotus does before sealing (each
    /// piece zero-padded to 127·2^k bytes, fr32-padded and aligned by filecoin-proofs'
    /// add_piece, the rest of the sector zero), and print the sector's `data` for a batch
    /// config: {path, pieces: [{comm_p, size}]} plus the sector's comm_d.
    Stage {
        /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
        #[arg(long)]
        sector_size: String,
        /// A raw piece file (repeat, in order).
        #[arg(long = "piece", required = true)]
        pieces: Vec<PathBuf>,
        /// The staged sector file to write.
        #[arg(long)]
        out: PathBuf,
        /// Print instead the sector's `data` for a SealBatch (one line of JSON, which YAML
        /// reads too): {file: this path, relative to the batch's dataSource, pieces: [{cid,
        /// size}]}.
        #[arg(long, value_name = "FILE")]
        sealbatch_file: Option<String>,
    },
    /// SnapDeals: encode deal data into sealed CC sectors (filecoin-proofs' encode_into, every
    /// sector of the config at once). Writes `<output_dir>/<sector_id>/{sealed,cache/}` and
    /// `results.json` with comm_d_new, comm_r_old, comm_r_last_new and comm_r_new.
    Snap {
        /// Update config (JSON): registered_proof, output_dir, sectors[] {sector_id,
        /// sector_key, sector_key_cache, data {path, pieces}, comm_d?}.
        #[arg(long)]
        config: PathBuf,
        /// Also write the results here (Kubernetes termination message; env SEALER_TERMINATION_LOG).
        #[arg(long, env = "SEALER_TERMINATION_LOG")]
        termination_log: Option<PathBuf>,
    },
    /// V1_1 C1 from the slot, after PC2 and once the seeds are known: each seeded sector's
    /// `commit-phase1-output` in its cache directory, from the labels in the slot (no layer
    /// files kept). The batch's results.json (PC2) gives comm_r and comm_d.
    C1 {
        /// Batch config (JSON), as for `batch`.
        #[arg(long)]
        config: PathBuf,
        /// Seeds (JSON): {"sectors": [{"sector_id": N, "seed": "<64 hex>"}]}.
        #[arg(long)]
        seeds: PathBuf,
        /// Also write the results here (Kubernetes termination message; env SEALER_TERMINATION_LOG).
        #[arg(long, env = "SEALER_TERMINATION_LOG")]
        termination_log: Option<PathBuf>,
    },
    /// SnapDeals with crates.io filecoin-proofs (`encode_into`, one sector at a time) on an
    /// update config: prints the results in `sealer snap`'s format, the reference the e2e
    /// compares sealfleet's updates with. Test sector sizes only.
    OracleSnap {
        /// Update config (JSON), as for `sealer snap`; its output_dir is not used.
        #[arg(long)]
        config: PathBuf,
        /// Work directory for the updated replicas.
        #[arg(long, default_value = "/var/tmp/sealer-oracle-snap")]
        work: PathBuf,
    },
    /// Seal the config's sectors with crates.io filecoin-proofs (PC1 + PC2, one at a time) and
    /// print their commitments in the results.json format: the reference the demo and the
    /// e2e tests compare sealfleet's results with. Test sector sizes (2KiB, 8MiB, 512MiB) only.
    Oracle {
        /// Batch config (JSON); its layers and output_dir are not used.
        #[arg(long)]
        config: PathBuf,
        /// Work directory for the rust-fil-proofs parent cache and the sector files.
        #[arg(long, default_value = "/var/tmp/sealer-oracle")]
        work: PathBuf,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// PC2: filecoin-proofs seal_pre_commit_phase2 vs sealer PC2, seconds per sector.
    Pc2 {
        /// Sector size: 2KiB, 8MiB or 512MiB.
        #[arg(long, default_value = "8MiB")]
        sector_size: String,
        /// Sectors in the sealer batch.
        #[arg(long, default_value_t = 4)]
        batch: usize,
        /// Work directory.
        #[arg(long, default_value = "/dev/shm/sealer-bench")]
        dir: PathBuf,
        /// `gpu` adds the GPU engine (OpenCL device `SEALER_GPU_DEVICE`, else the first GPU)
        /// beside the CPU engine.
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "gpu"])]
        engine: String,
    },
    /// SHA bound vs rust-fil-proofs PC1 vs sealer PC1 on N = 1, 8, 32.
    Pc1 {
        /// Sector size: 2KiB, 8MiB (quick) or 512MiB.
        #[arg(long, default_value = "512MiB")]
        sector_size: String,
        /// Comma-separated batch sizes.
        #[arg(long, default_value = "1,8,32")]
        batches: String,
        /// Directory for layer files (tmpfs measures the engine; a disk measures I/O).
        #[arg(long, default_value = "/dev/shm/sealer-bench")]
        dir: PathBuf,
        /// Skip the rust-fil-proofs baseline.
        #[arg(long)]
        skip_baseline: bool,
        /// Seconds per SHA-bound measurement.
        #[arg(long, default_value_t = 2.0)]
        sha_seconds: f64,
        /// Node-cache budgets of the sealer runs in MiB, one run each (a budget of 2 layers
        /// keeps the previous layer in memory), e.g. 1024,2200.
        #[arg(long, default_value = "1024")]
        cache_mib: String,
        /// Also run every N with its buffers on up to this many 1 GiB hugepages (free in the
        /// node's pool), for a row on ordinary pages and one on hugepages.
        #[arg(long, default_value_t = 0)]
        hugepages: usize,
        /// Percentages of the previous layer held resident, one run each (e.g. 0,50,100); used
        /// when --cache-mib cannot keep the whole previous layer.
        #[arg(long, default_value = "")]
        resident: String,
        /// Label only the first K layers of each batch (0: all), for large batches whose
        /// every layer would not fit the time or the disk; rates are per layer anyway.
        #[arg(long, default_value_t = 0)]
        layers: usize,
    },
}

fn fail(e: Pc1Error) -> ExitCode {
    eprintln!("sealer: {e}");
    ExitCode::from(e.exit_code() as u8)
}

/// Load a config and compute its data sectors' comm_d from their pieces (refusing one that
/// differs from a given comm_d): nothing downstream sees a data sector without its comm_d.
fn load(path: &Path) -> Result<BatchConfig, Pc1Error> {
    let mut cfg = BatchConfig::from_file(path).map_err(Pc1Error::from)?;
    sealer_data::resolve_comm_ds(&mut cfg).map_err(data_err)?;
    Ok(cfg)
}

fn data_err(e: sealer_data::DataError) -> Pc1Error {
    match e {
        sealer_data::DataError::Input(m) => Pc1Error::Input(m),
        sealer_data::DataError::Mismatch(m) => Pc1Error::DataMismatch(m),
        sealer_data::DataError::Io(m) => Pc1Error::Io(m),
    }
}

/// Before PC1 labels anything (a fresh or resumed run with layers left): every data sector's
/// staged file must be field elements whose tree-d root is the comm_d its pieces make, or the
/// batch fails here, with the slot untouched on a fresh run.
fn check_data_before_pc1(cfg: &BatchConfig) -> Result<(), Pc1Error> {
    if sealer_pc1::layers_done(cfg) >= cfg.num_layers() {
        return Ok(());
    }
    let t = std::time::Instant::now();
    let n = sealer_data::check_data(cfg).map_err(data_err)?;
    if n > 0 {
        log::info!("data of {n} sectors matches their pieces' comm_d ({:.1} s)", t.elapsed().as_secs_f64());
    }
    Ok(())
}

fn pc2_and_report(
    cfg: &BatchConfig,
    layer_files: bool,
    term: Option<PathBuf>,
    pc1: Option<&sealer_pc1::Pc1Report>,
    sink: Option<&sealer_pc1::ProgressSink>,
) -> ExitCode {
    match sealer_pc2::run_pc2_with(cfg, layer_files, sink) {
        Ok(res) if (sealer::synth::enabled(cfg) || sealer::c1::enabled(cfg)) && !proofs_after_pc2(cfg, &res) => {
            ExitCode::from(3)
        }
        Ok(res) => {
            let mut v = serde_json::json!({ "sectors": res });
            if let Some(cpus) = pc1.and_then(|r| r.cpus.as_ref()) {
                v["cpus"] = serde_json::json!(cpus);
            }
            if let Some(b) = pc1.and_then(|r| r.buffers.as_ref()) {
                v["buffers"] = serde_json::json!(b);
            }
            report_results(&v, res.len(), &cfg.output_dir, term);
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// Print the results on stdout, as one `SEALER_RESULTS` line on stderr (the operator finds it
/// in the log when the termination message, 4 KiB, cannot hold a large batch's results), and
/// in the termination message (or there, only where `results.json` is).
fn report_results(v: &serde_json::Value, sectors: usize, output_dir: &Path, term: Option<PathBuf>) {
    println!("{}", serde_json::to_string_pretty(v).unwrap());
    eprintln!("SEALER_RESULTS {v}");
    if let Some(t) = term {
        let mut s = v.to_string();
        if s.len() > 4096 {
            s = serde_json::json!({"sectors": sectors, "results": output_dir.join("results.json")}).to_string();
        }
        let _ = std::fs::write(t, s);
    }
}

/// SyntheticPoRep: every sector's vanilla proofs from its PC2 outputs; NI-PoRep: every
/// sector's C1 output. Then its layers go.
fn proofs_after_pc2(cfg: &BatchConfig, res: &[sealer_pc2::SectorResult]) -> bool {
    let hex32 = |s: &str| -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(&hex::decode(s).expect("PC2 wrote hex"));
        out
    };
    type WriteSector = fn(&BatchConfig, usize, &Path, &Path, [u8; 32], [u8; 32]) -> anyhow::Result<()>;
    let (what, write): (&str, WriteSector) = if sealer::c1::enabled(cfg) {
        ("C1 outputs (NI-PoRep)", sealer::c1::write_sector)
    } else {
        ("synthetic proofs", sealer::synth::write_sector)
    };
    for (i, r) in res.iter().enumerate() {
        let p = sealer_pc2::sector_paths(cfg, r.sector_id);
        if let Err(e) = write(cfg, i, &p.cache, &p.sealed, hex32(&r.comm_r), hex32(&r.comm_d)) {
            eprintln!("sealer: {what}: {e:#}");
            return false;
        }
    }
    log::info!("{what} written for {} sectors; their layer files removed", res.len());
    true
}

/// Refuse, before any work, a SyntheticPoRep batch told to keep no layer files: its proofs are
/// made from them after PC2.
fn synth_needs_layers(cfg: &BatchConfig, layer_files: bool) -> Option<ExitCode> {
    ((sealer::synth::enabled(cfg) || sealer::c1::enabled(cfg)) && !layer_files).then(|| {
        eprintln!(
            "sealer: SyntheticPoRep proofs and NI-PoRep C1 outputs are made from the layer files after PC2: drop --no-layer-files"
        );
        ExitCode::from(2)
    })
}

/// Point storage-proofs at the node's verified parent cache (read-only) for what it builds from
/// the graph after PC1 (synthetic proofs). Before anything reads its settings.
fn use_node_parent_cache(cfg: &BatchConfig) {
    if let Some(dir) = &cfg.parent_cache_dir {
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir);
    }
}

/// `sealer c1`: the seeds and PC2's commitments of each seeded sector, then C1 from the slot.
fn c1_from_slot(cfg: &BatchConfig, seeds_path: &Path) -> Result<serde_json::Value, Pc1Error> {
    let input = |m: String| Pc1Error::Input(m);
    let text =
        std::fs::read_to_string(seeds_path).map_err(|e| input(format!("cannot read {}: {e}", seeds_path.display())))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| input(format!("{}: {e}", seeds_path.display())))?;
    let results: serde_json::Value = std::fs::read_to_string(cfg.output_dir.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| input(format!("no results.json in {}: run PC2 first", cfg.output_dir.display())))?;
    let hex32 = |field: &str, v: &serde_json::Value| sealer_config::parse_hex32(field, v).map_err(Pc1Error::from);
    let mut seeded = Vec::new();
    for (i, s) in
        v["sectors"].as_array().ok_or_else(|| input("seeds: want {\"sectors\": [...]}".into()))?.iter().enumerate()
    {
        let id = s["sector_id"].as_u64().ok_or_else(|| input(format!("sectors[{i}].sector_id: missing")))?;
        let index = cfg
            .sectors
            .iter()
            .position(|c| c.sector_id == id)
            .ok_or_else(|| input(format!("sectors[{i}].sector_id: sector {id} is not in the batch")))?;
        let r = results["sectors"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["sector_id"].as_u64() == Some(id)))
            .ok_or_else(|| input(format!("sector {id}: not in results.json (PC2 did not finish it)")))?;
        seeded.push(sealer::c1::SeededSector {
            index,
            seed: hex32(&format!("sectors[{i}].seed"), &s["seed"])?,
            comm_r: hex32("results comm_r", &r["comm_r"])?,
            comm_d: hex32("results comm_d", &r["comm_d"])?,
        });
    }
    let mut reader = sealer_pc1::LayerReader::open(cfg)?;
    let parents = sealer_pc1::open_parents(cfg)?;
    let done =
        sealer::c1::from_slot(cfg, &seeded, &mut reader, &parents).map_err(|e| Pc1Error::Io(format!("{e:#}")))?;
    let sectors: Vec<_> =
        done.iter().map(|(id, p)| serde_json::json!({"sector_id": id, "c1_output": p.display().to_string()})).collect();
    Ok(serde_json::json!({ "sectors": sectors }))
}

/// `sealer capabilities`' document.
fn capabilities() -> serde_json::Value {
    let gpu = sealer_pc2::engine::device_index()
        .map_err(|e| e.to_string())
        .and_then(|i| sealer_gpu::Gpu::open(i).map_err(|e| e.to_string()));
    let mut engines = vec!["cpu"];
    let mut v = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "opencl_devices": sealer_gpu::devices(),
        // Layer devices are read through io_uring on kernel block devices and files; there is
        // no SPDK backend, so no vfio (the operator keeps batches off vfio nodes).
        "layer_device_modes": ["kernel"],
    });
    match gpu {
        Ok(g) => {
            engines.push("gpu");
            v["gpu_device"] = serde_json::json!(g.info());
        }
        Err(e) => v["gpu_unavailable"] = e.into(),
    }
    v["pc2_engines"] = serde_json::json!(engines);
    v
}

/// `sealer snap`: check each sector's data against its pieces, encode them all, write results.json.
fn snap(path: &Path) -> Result<(serde_json::Value, sealer_config::SnapConfig), Pc1Error> {
    let text =
        std::fs::read_to_string(path).map_err(|e| Pc1Error::Input(format!("cannot read {}: {e}", path.display())))?;
    let cfg = sealer_config::SnapConfig::from_json(&text)?;
    let size = cfg.proof.sector_size;
    let mut sectors = Vec::with_capacity(cfg.sectors.len());
    for (i, s) in cfg.sectors.iter().enumerate() {
        let from_pieces = sealer_data::pieces_comm_d(size, &s.data.pieces)
            .map_err(|e| Pc1Error::Input(format!("sectors[{i}].data.pieces: sector {}: {e}", s.sector_id)))?;
        if let Some(given) = s.comm_d.filter(|g| *g != from_pieces) {
            return Err(Pc1Error::DataMismatch(format!(
                "sectors[{i}].comm_d: sector {} gives comm_d {} but its pieces make {}",
                s.sector_id,
                hex::encode(given),
                hex::encode(from_pieces)
            )));
        }
        let dir = cfg.output_dir.join(s.sector_id.to_string());
        sectors.push(sealer_pc2::snap::SnapSector {
            // Encoding reads only the sector's number, data and comm_d.
            sector: sealer_config::SectorSpec {
                prover_id: [0; 32],
                sector_id: s.sector_id,
                ticket: [0; 32],
                comm_d: Some(from_pieces),
                data: Some(s.data.clone()),
            },
            sector_key: s.sector_key.clone(),
            sector_key_cache: s.sector_key_cache.clone(),
            replica: dir.join("sealed"),
            cache: dir.join("cache"),
        });
    }
    let engine = sealer_pc2::engine::Engine::open(cfg.pc2_engine)?;
    let t = std::time::Instant::now();
    let res = sealer_pc2::snap::encode_sectors(size, &sectors, &engine)?;
    log::info!("{} sectors updated in {:.1} s", res.len(), t.elapsed().as_secs_f64());
    let v = serde_json::json!({ "sectors": res });
    let tmp = cfg.output_dir.join("results.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&v).unwrap())
        .map_err(|e| Pc1Error::Io(format!("writing results.json: {e}")))?;
    std::fs::rename(&tmp, cfg.output_dir.join("results.json"))
        .map_err(|e| Pc1Error::Io(format!("renaming results.json: {e}")))?;
    Ok((v, cfg))
}

fn main() -> ExitCode {
    // Everything that logs, filecoin-proofs and storage-proofs included, goes through the `log`
    // facade to stderr; RUST_LOG sets the level (default info).
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Pc1 { config, allow_portable_hash, restart, no_pin, quiet, cache_mib, resident_mib } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            let mut opts = Pc1Options {
                allow_portable_hash,
                restart,
                pin_threads: !no_pin,
                progress_bar: !quiet,
                ..Default::default()
            };
            opts.tuning.ring_bytes = cache_mib << 20;
            // The flag overrides the config's share (resident_bytes, booked by the operator).
            opts.tuning.resident_bytes = if resident_mib > 0 { resident_mib << 20 } else { cfg.resident_bytes };
            if let Err(e) = check_data_before_pc1(&cfg) {
                return fail(e);
            }
            match sealer_pc1::run_pc1(&cfg, &opts) {
                Ok(r) => {
                    let out = serde_json::json!({
                        "phase": "pc1",
                        "state": "done",
                        "layers": r.layers,
                        "first_layer_this_run": r.first_layer,
                        "seconds": r.seconds,
                        "labels": r.labels,
                        "labels_per_second": if r.seconds > 0.0 { r.labels as f64 / r.seconds } else { 0.0 },
                        "kernel": format!("{:?}", r.kernel),
                        "backend": r.backend,
                        "cpus": r.cpus,
                        "buffers": r.buffers,
                        "sectors": cfg.sectors.iter().zip(r.replica_ids.iter().zip(r.comm_ds.iter())).map(|(s, (rid, cd))| serde_json::json!({
                            "sector_id": s.sector_id, "replica_id": hex::encode(rid), "comm_d": hex::encode(cd)
                        })).collect::<Vec<_>>(),
                    });
                    println!("{}", serde_json::to_string_pretty(&out).unwrap());
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Cmd::Pc2 { config, no_layer_files, termination_log } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            if let Some(code) = synth_needs_layers(&cfg, !no_layer_files) {
                return code;
            }
            use_node_parent_cache(&cfg);
            pc2_and_report(&cfg, !no_layer_files, termination_log, None, None)
        }
        Cmd::Batch { config, allow_portable_hash, no_pin, quiet, no_layer_files, termination_log } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            if let Some(code) = synth_needs_layers(&cfg, !no_layer_files) {
                return code;
            }
            use_node_parent_cache(&cfg);
            let mut opts =
                Pc1Options { allow_portable_hash, pin_threads: !no_pin, progress_bar: !quiet, ..Default::default() };
            opts.tuning.resident_bytes = cfg.resident_bytes;
            if let Err(e) = check_data_before_pc1(&cfg) {
                return fail(e);
            }
            let sink = match sealer_pc1::ProgressSink::new(&cfg, !quiet) {
                Ok(s) => s,
                Err(e) => return fail(e),
            };
            let pc1 = match sealer_pc1::run_pc1_with(&cfg, &opts, Some(&sink)) {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
            pc2_and_report(&cfg, !no_layer_files, termination_log, Some(&pc1), Some(&sink))
        }
        Cmd::VerifyPc1 { config, nodes, seed } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
            });
            match sealer_pc1::verify_nodes(&cfg, nodes, seed) {
                Ok(r) => {
                    println!(
                        "{}",
                        serde_json::json!({"checked_nodes": r.checked, "sectors": cfg.sectors.len(), "seed": seed,
                            "mismatches": r.mismatches.iter().map(|(l, v, s)| serde_json::json!({"layer": l, "node": v, "sector_id": cfg.sectors[*s].sector_id})).collect::<Vec<_>>()})
                    );
                    if r.mismatches.is_empty() {
                        ExitCode::SUCCESS
                    } else {
                        log::error!("{} mismatching labels", r.mismatches.len());
                        ExitCode::from(5)
                    }
                }
                Err(e) => fail(e),
            }
        }
        Cmd::LayerExport { config, out } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            match sealer_pc1::export_layers(&cfg, &out) {
                Ok(n) => {
                    log::info!("exported {n} layers of {} sectors to {}", cfg.sectors.len(), out.display());
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Cmd::Stage { sector_size, pieces, out, sealbatch_file } => {
            let Some(&(size, ..)) = sealer_config::SECTOR_SIZES.iter().find(|s| s.1 == sector_size) else {
                eprintln!("sealer: --sector-size {sector_size:?} is not one of 2KiB, 8MiB, 512MiB, 32GiB, 64GiB");
                return ExitCode::from(2);
            };
            let refs: Vec<&Path> = pieces.iter().map(PathBuf::as_path).collect();
            let staged = sealer_data::stage(size, &refs, &out).and_then(|p| {
                sealer_data::pieces_comm_d(size, &p).map(|cd| (p, cd)).map_err(sealer_data::DataError::Input)
            });
            match staged {
                Ok((p, _)) if sealbatch_file.is_some() => {
                    let pieces: Vec<_> =
                        p.iter().map(|p| serde_json::json!({"cid": hex::encode(p.comm_p), "size": p.size})).collect();
                    println!("{}", serde_json::json!({"file": sealbatch_file, "pieces": pieces}));
                    ExitCode::SUCCESS
                }
                Ok((p, comm_d)) => {
                    let path = std::fs::canonicalize(&out).unwrap_or(out);
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&serde_json::json!({
                            "path": path,
                            "pieces": p.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>(),
                            "comm_d": hex::encode(comm_d),
                        }))
                        .unwrap()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    let code = e.exit_code() as u8;
                    eprintln!("sealer: {e}");
                    ExitCode::from(code)
                }
            }
        }
        Cmd::Capabilities { out } => {
            let doc = serde_json::to_string_pretty(&capabilities()).unwrap();
            println!("{doc}");
            if let Some(path) = out {
                let tmp = path.with_extension("tmp");
                if let Err(e) = std::fs::write(&tmp, &doc).and_then(|_| std::fs::rename(&tmp, &path)) {
                    eprintln!("sealer: writing {}: {e}", path.display());
                    return ExitCode::from(3);
                }
            }
            ExitCode::SUCCESS
        }
        Cmd::Plan { config, rate, cache_mib, resident_mib, no_layer_files, json } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            if !rate.is_finite() || rate <= 0.0 {
                eprintln!("sealer: --rate must be a positive number of labels per second");
                return ExitCode::from(2);
            }
            let resident_bytes = if resident_mib > 0 { resident_mib << 20 } else { cfg.resident_bytes };
            let tuning = sealer_pc1::Tuning { ring_bytes: cache_mib << 20, resident_bytes, ..Default::default() };
            let p = sealer::plan::plan(&cfg, tuning, rate, !no_layer_files);
            if json {
                println!("{}", serde_json::to_string_pretty(&p).unwrap());
            } else {
                print!("{}", sealer::plan::render(&p));
            }
            if p.ready() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            }
        }
        Cmd::Snap { config, termination_log } => match snap(&config) {
            Ok((v, cfg)) => {
                report_results(&v, cfg.sectors.len(), &cfg.output_dir, termination_log);
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Cmd::C1 { config, seeds, termination_log } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            use_node_parent_cache(&cfg);
            match c1_from_slot(&cfg, &seeds) {
                Ok(v) => {
                    report_results(&v, cfg.sectors.len(), &cfg.output_dir, termination_log);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Cmd::OracleSnap { config, work } => {
            let cfg = match std::fs::read_to_string(&config)
                .map_err(|e| Pc1Error::Input(format!("cannot read {}: {e}", config.display())))
                .and_then(|t| sealer_config::SnapConfig::from_json(&t).map_err(Pc1Error::from))
            {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            match sealer::oracle::snap_update(&cfg, &work) {
                Ok(v) => {
                    println!("{}", serde_json::to_string_pretty(&v).unwrap());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sealer oracle-snap: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Oracle { config, work } => {
            let cfg = match load(&config) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            match sealer::oracle::precommit_batch(&cfg, &work) {
                Ok(v) => {
                    println!("{}", serde_json::to_string_pretty(&v).unwrap());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sealer oracle: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::ParentCache { proof, dir } => {
            let Some(p) = sealer_config::RegisteredProof::parse(&proof) else {
                eprintln!("sealer: --proof {proof:?} is not a registered proof name (e.g. StackedDrg32GiBV1_1)");
                return ExitCode::from(2);
            };
            // storage-proofs-porep reads these once per process: the node's directory, and its
            // own manifest check for the graphs it knows.
            std::env::set_var("FIL_PROOFS_PARENT_CACHE", &dir);
            std::env::set_var("FIL_PROOFS_VERIFY_CACHE", "1");
            let nodes = p.sector_size / 32;
            let porep_id = sealer_config::porep_id_for(p.proof_id);
            match sealer_graph::store::build_or_verify(
                &dir,
                &proof,
                nodes,
                porep_id,
                sealer_pc1::graph_api(p.api_version),
            ) {
                Ok((m, outcome)) => {
                    match &outcome {
                        sealer_graph::store::CacheOutcome::Verified => log::info!("parent cache for {proof} verified"),
                        sealer_graph::store::CacheOutcome::Built(None) => {
                            log::info!("parent cache for {proof} built in {:.1} s", m.build_seconds)
                        }
                        sealer_graph::store::CacheOutcome::Built(Some(why)) => {
                            log::warn!("parent cache for {proof} rebuilt ({why})")
                        }
                    }
                    println!("{}", serde_json::to_string_pretty(&m).unwrap());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sealer: parent cache for {proof}: {e}");
                    ExitCode::from(3)
                }
            }
        }
        Cmd::Calc { batch_size, config } => {
            let layout = match config {
                Some(p) => match load(&p) {
                    Ok(c) => c.effective_layout(),
                    Err(e) => return fail(e),
                },
                None => {
                    if batch_size == 0 || batch_size > sealer_config::MAX_BATCH || !batch_size.is_power_of_two() {
                        eprintln!("sealer: --batch-size must be a power of two from 1 to {}", sealer_config::MAX_BATCH);
                        return ExitCode::from(2);
                    }
                    Layout::default_for(batch_size)
                }
            };
            println!("{}", serde_json::to_string_pretty(&layout).unwrap());
            ExitCode::SUCCESS
        }
        Cmd::Bench { what: BenchCmd::Pc2 { sector_size, batch, dir, engine } } => {
            let Some(size) =
                sealer_config::SECTOR_SIZES.iter().find(|s| s.1.eq_ignore_ascii_case(&sector_size)).map(|s| s.0)
            else {
                eprintln!("sealer: --sector-size must be one of 2KiB, 8MiB, 512MiB");
                return ExitCode::from(2);
            };
            if batch == 0 || batch > 128 || !batch.is_power_of_two() {
                eprintln!("sealer: --batch must be a power of two from 1 to 128");
                return ExitCode::from(2);
            }
            match sealer::bench::run_pc2(size, batch, &dir, engine == "gpu") {
                Ok(t) => {
                    println!("{t}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sealer: bench failed: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Bench {
            what:
                BenchCmd::Pc1 {
                    sector_size,
                    batches,
                    dir,
                    skip_baseline,
                    sha_seconds,
                    cache_mib,
                    hugepages,
                    resident,
                    layers,
                },
        } => {
            let size = match sealer_config::SECTOR_SIZES
                .iter()
                .find(|s| s.1.eq_ignore_ascii_case(&sector_size) || s.0.to_string() == sector_size)
            {
                Some(s) => s.0,
                None => {
                    eprintln!("sealer: --sector-size must be one of 2KiB, 8MiB, 512MiB");
                    return ExitCode::from(2);
                }
            };
            let batches: Vec<usize> = batches
                .split(',')
                .filter_map(|s| s.trim().parse().ok())
                .filter(|n: &usize| n.is_power_of_two() && *n <= 128)
                .collect();
            let o = sealer::bench::BenchOptions {
                sector_size: size,
                batches,
                dir,
                skip_baseline,
                sha_seconds,
                cache_bytes: match cache_mib.split(',').map(|s| s.trim().parse::<u64>().map(|m| m << 20)).collect() {
                    Ok(v) => v,
                    Err(_) => {
                        eprintln!("sealer: --cache-mib takes MiB values, e.g. 1024 or 1024,2200");
                        return ExitCode::from(2);
                    }
                },
                max_layers: (layers > 0).then_some(layers),
                hugepages,
                resident_percents: resident
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| s.trim().parse::<u64>().ok().filter(|p| *p <= 100))
                    .collect::<Option<Vec<_>>>()
                    .unwrap_or_default(),
            };
            if !resident.trim().is_empty() && o.resident_percents.is_empty() {
                eprintln!("sealer: --resident takes percentages from 0 to 100, e.g. 0,50,100");
                return ExitCode::from(2);
            }
            match sealer::bench::run(&o) {
                Ok(rows) => {
                    println!("{}", sealer::bench::render(&rows, size));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sealer: bench failed: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
