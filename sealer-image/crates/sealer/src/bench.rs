//! `sealer bench pc1`: the SHA bound, rust-fil-proofs PC1, and the sealer on N sectors, all
//! on this machine in one invocation, reported as sector-labels/s per core.

use crate::{bench_peer, oracle};
use sealer_config::{ApiVersion, BatchConfig, Layout, Pc2Engine};
use sealer_hash::Kernel;
use sealer_pc1::Pc1Options;
use sealer_slot::Tuning;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bench options.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Sector size in bytes (8 MiB quick, 512 MiB default).
    pub sector_size: u64,
    /// Batch sizes for the sealer.
    pub batches: Vec<usize>,
    /// Directory for layer files (use tmpfs to measure the engine, a disk to measure I/O).
    pub dir: PathBuf,
    /// Skip the rust-fil-proofs baseline.
    pub skip_baseline: bool,
    /// Seconds per SHA-bound measurement.
    pub sha_seconds: f64,
    /// Node-cache budgets of the sealer runs, bytes: every N runs once per value.
    pub cache_bytes: Vec<u64>,
    /// Label only the first this many layers of each batch (None: all).
    pub max_layers: Option<usize>,
    /// When > 0, run every N twice: buffers on ordinary pages, then on up to this many 1 GiB
    /// hugepages (the node's pool must hold them free).
    pub hugepages: usize,
    /// Percentages of the previous layer held resident; every N runs once per value (e.g.
    /// 0, 50, 100). Only matters when the node cache cannot keep the whole previous layer.
    pub resident_percents: Vec<u64>,
}

/// One row of the result table.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured.
    pub name: String,
    /// Sector-labels per second (all cores used).
    pub labels_per_s: f64,
    /// Cores the measurement used.
    pub cores: f64,
    /// Wall seconds.
    pub seconds: f64,
    /// CPU seconds (user + system, all threads of this process incl. io_uring workers).
    pub cpu_seconds: f64,
    /// Sector-labels computed.
    pub labels: f64,
    /// 4 KiB random page reads per sector-label (sealer rows only).
    pub reads_per_label: Option<f64>,
    /// Per-layer figures (sealer rows only).
    pub layers: Vec<sealer_pc1::LayerStats>,
    /// Random reads/s a 32 GiB batch of the same N and resident share would need at this
    /// row's rate (`sealer plan`'s model; sealer rows only).
    pub iops_32gib: Option<f64>,
}

impl Row {
    /// A one-core rate measured for `seconds` (the SHA bounds).
    fn measured(name: &str, labels_per_s: f64, seconds: f64, cpu_seconds: f64) -> Row {
        Row {
            name: name.into(),
            labels_per_s,
            cores: 1.0,
            seconds,
            cpu_seconds,
            labels: labels_per_s * seconds,
            reads_per_label: None,
            layers: Vec::new(),
            iops_32gib: None,
        }
    }
    /// Labels/s per core, wall-clock based (labels/s divided by the cores the run may use).
    pub fn per_core(&self) -> f64 {
        self.labels_per_s / self.cores
    }
    /// Labels per CPU-second actually consumed (robust on a shared machine).
    pub fn per_cpu_second(&self) -> f64 {
        if self.cpu_seconds > 0.0 {
            self.labels / self.cpu_seconds
        } else {
            0.0
        }
    }
}

pub use sealer_bench::cpu_now;

fn cpu_timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let c0 = cpu_now();
    let r = f();
    (r, cpu_now() - c0)
}

/// Sector-labels/s of one thread hashing `streams` sectors per kernel call (1, 2 or 3) with
/// the engine's own call (`label_rows`) on parents in memory: the bound the engine can reach.
/// `None`: SHA-NI, or 0 when this CPU lacks it.
fn sha_bound(kernel: Option<Kernel>, streams: usize, secs: f64) -> f64 {
    match kernel.map(Ok).unwrap_or_else(|| Kernel::select(false)) {
        Ok(k) => sealer_hash::bound_rate(k, streams, secs),
        Err(_) => 0.0,
    }
}

fn cores_of(l: &Layout) -> f64 {
    let mut cpus = std::collections::BTreeSet::new();
    for c in &l.coordinators {
        cpus.insert(c.cpu);
        for h in &c.hashers {
            cpus.insert(h.cpu);
        }
    }
    cpus.insert(l.roles.reader);
    cpus.insert(l.roles.writer);
    cpus.insert(l.roles.orchestrator);
    cpus.len() as f64
}

pub use sealer_bench::slot::random_config;
use sealer_bench::slot::{fill_random_layers, rand32};

/// Run the benchmark and return the table rows.
pub fn run(o: &BenchOptions) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let size_idx =
        sealer_config::SECTOR_SIZES.iter().position(|s| s.0 == o.sector_size).ok_or("unsupported sector size")?;
    let proof_id = 5 + size_idx as u64; // V1_1
    std::fs::create_dir_all(&o.dir).map_err(|e| format!("{e:#}"))?;
    oracle::set_cache_env(&o.dir.join("fil-cache"));
    std::env::set_var("FIL_PROOFS_USE_MULTICORE_SDR", "1");

    log::info!("SHA-NI bound (1, 2 and 3 streams interleaved)…");
    for (streams, name) in [
        (1, "SHA-NI bound, 1 stream (20 blocks/label)"),
        (2, "SHA-NI bound, 2 streams interleaved"),
        (3, "SHA-NI bound, 3 streams interleaved (the engine's kernel)"),
    ] {
        let (rate, cpu) = cpu_timed(|| sha_bound(None, streams, o.sha_seconds));
        rows.push(Row::measured(name, rate, o.sha_seconds, cpu));
    }
    let (rate, cpu) = cpu_timed(|| sha_bound(Some(Kernel::Portable), 1, o.sha_seconds));
    rows.push(Row::measured("sha2 crate compress256, 1 stream (reference)", rate, o.sha_seconds, cpu));

    // Build the parent cache first so neither side pays for it in the timings.
    let probe = random_config(o.sector_size, proof_id, ApiVersion::V1_1_0, 1, 1, &o.dir, &o.dir.join("probe"));
    sealer_slot::open_parents(&probe).map_err(|e| format!("{e:#}"))?;

    if !o.skip_baseline {
        let multicore = cfg!(feature = "oracle-multicore");
        log::info!("rust-fil-proofs PC1, one sector (multicore-sdr: {multicore})…");
        let work = o.dir.join("rfp");
        std::fs::create_dir_all(&work).map_err(|e| format!("{e:#}"))?;
        let t0 = Instant::now();
        let r0 = cpu_now();
        oracle::pc1_sector(&probe, &probe.sectors[0], &work, false).map_err(|e| format!("{e:#}"))?;
        let secs = t0.elapsed().as_secs_f64();
        let cpu = cpu_now() - r0;
        let labels = (o.sector_size / 32) as f64 * oracle::filecoin_proofs_layers(o.sector_size) as f64;
        let cores = if multicore { sealer_config::allowed_cpus().len() as f64 } else { 1.0 };
        rows.push(Row {
            name: format!(
                "rust-fil-proofs PC1, 1 sector ({})",
                if multicore { "multicore-sdr" } else { "single-core path" }
            ),
            labels_per_s: labels / secs,
            cores,
            seconds: secs,
            cpu_seconds: cpu,
            labels,
            reads_per_label: None,
            layers: Vec::new(),
            iops_32gib: None,
        });
        let _ = std::fs::remove_dir_all(&work);
    }

    let backings: &[usize] = if o.hugepages > 0 { &[0, o.hugepages] } else { &[0] };
    let residents: &[u64] = if o.resident_percents.is_empty() { &[0] } else { &o.resident_percents };
    let caches: &[u64] = if o.cache_bytes.is_empty() { &[1 << 30] } else { &o.cache_bytes };
    let runs = o.batches.iter().flat_map(|n| {
        caches.iter().flat_map(move |c| backings.iter().flat_map(move |h| residents.iter().map(move |r| (n, c, h, r))))
    });
    for (&n, &cache_bytes, &huge, &resident_pct) in runs {
        log::info!("sealer PC1, N = {n}…");
        let out = o.dir.join(format!("sealer-n{n}"));
        let _ = std::fs::remove_dir_all(&out);
        let cfg = random_config(
            o.sector_size,
            proof_id,
            ApiVersion::V1_1_0,
            n,
            42 + n as u64,
            &o.dir.join(format!("sealer-n{n}-layers")),
            &out,
        );
        let mut cfg = cfg;
        cfg.hugepages_1gi = huge;
        // The resident share of one layer of the batch (N × sector size bytes).
        let resident_bytes = resident_pct * n as u64 * o.sector_size / 100;
        let opts = Pc1Options {
            tuning: Tuning { ring_bytes: cache_bytes, resident_bytes, ..Tuning::default() },
            restart: true,
            max_layers: o.max_layers,
            ..Default::default()
        };
        let r0 = cpu_now();
        let rep = sealer_pc1::run_pc1(&cfg, &opts).map_err(|e| format!("{e:#}"))?;
        let cpu = cpu_now() - r0;
        let cores = cores_of(&cfg.effective_layout());
        let pages = match &rep.buffers {
            Some(b) if o.hugepages > 0 && b.hugepage_bytes > 0 => {
                format!(", buffers on {} x 1 GiB hugepages", b.hugepages_mapped)
            }
            _ if o.hugepages > 0 => ", buffers on 4 KiB pages".to_string(),
            _ => String::new(),
        };
        let expanders = if rep.geometry.keep_prev_layer {
            "memory".to_string()
        } else if rep.geometry.resident > 0 {
            format!(
                "storage, {:.0} % of the previous layer resident",
                100.0 * rep.geometry.resident as f64 / rep.geometry.nodes as f64
            )
        } else {
            "storage".to_string()
        };
        rows.push(Row {
            name: format!(
                "sealer PC1, N = {n} ({} hasher threads, {:?}, {}, {} MiB node cache, expanders from {expanders}{pages}{})",
                rep.hasher_threads,
                rep.kernel,
                rep.backend,
                cache_bytes >> 20,
                if rep.layer_stats.len() < rep.layers { format!(", layers 1-{}", rep.layer_stats.len()) } else { String::new() },
            ),
            labels_per_s: rep.labels as f64 / rep.seconds,
            cores,
            seconds: rep.seconds,
            cpu_seconds: cpu,
            labels: rep.labels as f64,
            reads_per_label: Some(rep.pages_read as f64 / rep.labels as f64),
            layers: rep.layer_stats.clone(),
            iops_32gib: Some(
                rep.labels as f64 / rep.seconds / n as f64
                    * crate::plan::expander_reads_per_node(resident_pct as f64 / 100.0),
            ),
        });
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_dir_all(o.dir.join(format!("sealer-n{n}-layers")));
    }
    Ok(rows)
}

/// Render the table with ratios against the rust-fil-proofs row (labels per CPU-second) and
/// the 2-stream SHA bound (labels/s per core, wall).
pub fn render(rows: &[Row], sector_size: u64) -> String {
    let base = rows.iter().find(|r| r.name.starts_with("rust-fil-proofs")).map(|r| r.per_cpu_second());
    let bound = rows.iter().find(|r| r.name.starts_with("SHA-NI bound, 2 streams")).map(|r| r.per_core());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut s = format!(
        "sector size {sector_size} B, {} CPUs available, load average at end: {}\n\
         M labels/s/core (wall) = sector-labels/s ÷ cores the run may use; M labels/CPU-s = sector-labels ÷ CPU seconds this process consumed.\n\
         vs rust-fil-proofs: labels per CPU-second; vs 2-stream SHA bound: M labels/s/core (wall).\n\
         4 KiB reads per sector-label: random parent page reads ÷ sector-labels (the resident part's sequential fill not counted).\n\
         32 GiB batch needs: expander reads/s of a 32 GiB batch of the same N and resident share at this row's rate (8 per node step, less the resident share).\n\
         | measurement | wall s | cores | M labels/s | M labels/s/core (wall) | M labels/CPU-s | 4 KiB reads / sector-label | 32 GiB batch needs, reads/s | vs rust-fil-proofs | vs 2-stream SHA bound |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        sealer_config::allowed_cpus().len(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    for r in rows {
        let vs = |x: f64, b: Option<f64>| {
            b.filter(|b| *b > 0.0).map(|b| format!("{:.2}×", x / b)).unwrap_or_else(|| "–".into())
        };
        s += &format!(
            "| {} | {:.2} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} |\n",
            r.name,
            r.seconds,
            r.cores,
            r.labels_per_s / 1e6,
            r.per_core() / 1e6,
            r.per_cpu_second() / 1e6,
            r.reads_per_label.map_or("–".into(), |x| format!("{x:.3}")),
            r.iops_32gib.map_or("–".into(), |x| format!("{:.2} M", x / 1e6)),
            vs(r.per_cpu_second(), base),
            vs(r.per_core(), bound)
        );
    }
    for r in rows.iter().filter(|r| !r.layers.is_empty()) {
        s += &format!(
            "\n{}, per layer. Reads: random 4 KiB parent reads per sector-label, and what \
             reading each page that holds a parent not in memory once per layer would make. Reader CPU: the reader thread's CPU \
             time per read (resolving parents, submitting, reaping). Hasher wait: share of the layer the \
             hashers were not hashing.\n\
             | layer | s | M labels/s/core (wall) | reads / sector-label | each page once | IOPS | reader CPU µs / read | hasher wait |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|\n",
            r.name
        );
        for l in &r.layers {
            s += &format!(
                "| {} | {:.2} | {:.3} | {:.4} | {:.4} | {:.0} | {} | {:.0} % |\n",
                l.layer,
                l.seconds,
                l.labels as f64 / l.seconds / r.cores / 1e6,
                l.reads_per_label(),
                l.min_reads_per_label(),
                l.iops(),
                l.reader_cpu_us_per_read().map_or("–".into(), |x| format!("{x:.2}")),
                100.0 * l.hasher_wait()
            );
        }
    }
    s
}

/// `sealer bench pc2`: filecoin-proofs seal_pre_commit_phase2 (CPU, one sector) against the
/// sealer's PC2 engines on a batch of `n` sectors (PC1 done once first, untimed), plus each
/// engine's Poseidon rates at the arities a 32 GiB sector uses (11 for columns, 8 for trees),
/// from which the table derives seconds for a 32 GiB sector.
/// What `bench pc2` runs beside filecoin-proofs' one-sector baseline.
pub struct Pc2Bench<'a> {
    /// Sector size in bytes (2 KiB, 8 MiB or 512 MiB).
    pub sector_size: u64,
    /// Sectors in the sealer batch.
    pub batch: usize,
    /// Work directory.
    pub dir: &'a Path,
    /// Run the GPU engine.
    pub gpu: bool,
    /// Leave the CPU engine's PC2 out (on a lent GPU machine its 512 MiB run costs more than the
    /// lease); its Poseidon rates are still measured as the baseline.
    pub skip_cpu: bool,
    /// Random labels in the slot instead of PC1, and no filecoin-proofs sector: PC2's work does
    /// not depend on the labels' values, so this times PC2 where PC1 would cost too long.
    /// Outputs are then compared between engines only.
    pub random_layers: bool,
    /// Hashes per arity when measuring the engines' Poseidon rates.
    pub rate_hashes: usize,
}

/// The batch `bench pc2` seals in `dir` (the same for a given size and count, so that
/// filecoin-proofs' CPU run and the GPU peer seal the same first sector), with filecoin-proofs'
/// parent cache pointed into `dir`.
pub fn pc2_bench_config(sector_size: u64, n: usize, dir: &Path) -> Result<BatchConfig, String> {
    let size_idx =
        sealer_config::SECTOR_SIZES.iter().position(|s| s.0 == sector_size).ok_or("unsupported sector size")?;
    let proof_id = 5 + size_idx as u64;
    oracle::set_cache_env(&dir.join("fil-cache"));
    let out = dir.join(format!("pc2-sealer-n{n}"));
    Ok(random_config(sector_size, proof_id, ApiVersion::V1_1_0, n, 77, &dir.join("pc2-sealer-layers"), &out))
}

/// `bench pc2`: filecoin-proofs' PC2 of one sector vs the sealer's engines on a batch. Every
/// engine's comm_r of the batch's first sector must equal filecoin-proofs' (the same inputs), and
/// the engines' comm_rs must equal each other's: a GPU that computes fast and wrong fails the run.
pub fn run_pc2(b: &Pc2Bench) -> Result<String, String> {
    let Pc2Bench { sector_size, batch: n, dir, gpu, skip_cpu, random_layers, rate_hashes } = *b;
    if skip_cpu && !gpu {
        return Err("no engine to run: --skip-cpu needs --engine gpu".into());
    }
    let err = |e: &dyn std::fmt::Display| format!("{e:#}");
    std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
    let cfg = pc2_bench_config(sector_size, n, dir)?;
    let out = cfg.output_dir.clone();
    let _ = std::fs::remove_dir_all(&out);
    let cpus = sealer_config::allowed_cpus().len();
    let nodes = sector_size / 32;
    let mut table = format!(
        "sector size {sector_size} B, batch of {n}, {cpus} CPUs{}\n\
         | engine | s per sector | column hashes/s | tree hashes/s (arity 8) | arity-11 hashes/s | device busy | slot reads MB/s | 32 GiB sector, s | vs baseline |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        if random_layers { ", random labels in the slot (no PC1)" } else { "" }
    );
    let baseline = if random_layers {
        log::info!("pc2: random labels in the slot (untimed)…");
        std::fs::create_dir_all(&out).map_err(|e| err(&e))?;
        fill_random_layers(&cfg)?;
        // The CPU engine's hash rates stand in for the baseline: its 32 GiB prediction.
        let (tree, col11, name) = poseidon_rates(Pc2Engine::Cpu, rate_hashes)?;
        let big = big_sector_seconds(tree, col11);
        table += &format!(
            "| {name}: Poseidon rates only (baseline) | – | – | {tree:.0} | {col11:.0} | – | – | {big:.0} | 1.00× |\n"
        );
        Baseline::CpuRates(big)
    } else {
        let work = dir.join("pc2-rfp");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).map_err(|e| err(&e))?;
        log::info!("pc2: filecoin-proofs PC1+PC2 on one sector…");
        let o = oracle::precommit_sector(&cfg, &cfg.sectors[0], &work).map_err(|e| err(&e))?;
        let _ = std::fs::remove_dir_all(&work);
        log::info!("pc2: sealer PC1 (untimed) then PC2 on N = {n}…");
        sealer_pc1::run_pc1(&cfg, &Pc1Options { restart: true, ..Default::default() }).map_err(|e| err(&e))?;
        table += &format!(
            "| filecoin-proofs seal_pre_commit_phase2 (CPU), 1 sector | {:.2} | {:.0} | – | – | – | – | – | 1.00× |\n",
            o.pc2_seconds,
            nodes as f64 / o.pc2_seconds
        );
        Baseline::FilecoinProofs { pc2_seconds: o.pc2_seconds, comm_r: hex::encode(o.comm_r) }
    };
    let mut engines = Vec::new();
    if !skip_cpu {
        engines.push(Pc2Engine::Cpu);
    }
    if gpu {
        engines.push(Pc2Engine::Gpu);
    }
    let mut notes = String::new();
    let mut rows = Vec::new(); // the table's figures as data, with their units
    let mut mismatches = Vec::new();
    let mut first_comm_rs: Option<(Pc2Engine, Vec<String>)> = None;
    let mut ours_gpu: Option<GpuFigures> = None;
    for engine in engines {
        let mut c = cfg.clone();
        c.pc2_engine = engine;
        if engine == Pc2Engine::Gpu {
            // The kernels PC2 needs, built once before it (the driver caches them, and PC2's
            // own build then takes it from the cache): a cold build is timed apart from PC2.
            let t = Instant::now();
            sealer_gpu::Gpu::open(sealer_pc2::engine::device_index().map_err(|e| e.to_string())?)
                .and_then(|g| g.prepare(&[cfg.num_layers(), 8]))
                .map_err(|e| e.to_string())?;
            notes += &format!(
                "sealfleet gpu: first device open and kernel build {:.2} s (before the timed run).\n",
                t.elapsed().as_secs_f64()
            );
        }
        let t0 = Instant::now();
        let out = sealer_pc2::run_pc2_measured(&c, false, None).map_err(|e| err(&e))?;
        if let Some(f) = out.failed.first() {
            return Err(format!("{}: {}", engine.as_str(), f.reason));
        }
        let (results, bd) = (out.results, out.breakdown);
        let secs = t0.elapsed().as_secs_f64();
        let comm_rs: Vec<String> = results.iter().map(|r| r.comm_r.clone()).collect();
        if let Baseline::FilecoinProofs { comm_r, .. } = &baseline {
            if comm_rs.first() != Some(comm_r) {
                mismatches.push(format!(
                    "{}: sector {} comm_r {} != filecoin-proofs' {comm_r}",
                    engine.as_str(),
                    cfg.sectors[0].sector_id,
                    comm_rs.first().map_or("(none)", |s| s.as_str()),
                ));
            }
        }
        match &first_comm_rs {
            Some((other, theirs)) if *theirs != comm_rs => {
                mismatches.push(format!("{} and {} differ in the batch's comm_rs", engine.as_str(), other.as_str()))
            }
            Some(_) => {}
            None => first_comm_rs = Some((engine, comm_rs)),
        }
        let (tree_rate, col11_rate, name) = poseidon_rates(engine, rate_hashes)?;
        let per = secs / n as f64;
        let big = big_sector_seconds(tree_rate, col11_rate);
        let read = (c.num_layers() as u64 * nodes * 32 * n as u64) as f64 / bd.total.max(1e-9) / 1e6;
        let busy = match engine {
            Pc2Engine::Cpu => "–".to_string(),
            Pc2Engine::Gpu => format!("{:.0} %", 100.0 * bd.device.kernels / bd.total.max(1e-9)),
        };
        let ratio = baseline.ratio(per, big);
        if engine == Pc2Engine::Gpu {
            ours_gpu = Some(GpuFigures { seconds_per_sector: per, predicted_32gib: big });
        }
        table += &format!(
            "| sealfleet {} ({name}), N = {n} | {per:.2} | {:.0} | {tree_rate:.0} | {col11_rate:.0} | {busy} | {read:.0} | {big:.0} | {ratio:.2}× |\n",
            engine.as_str(),
            (nodes * n as u64) as f64 / secs,
        );
        rows.push(serde_json::json!({
            "engine": engine.as_str(), "device": name, "sector_bytes": sector_size, "sectors": n,
            "random_layers": random_layers, "seconds_per_sector": per,
            "column_hashes_per_s": (nodes * n as u64) as f64 / secs,
            "tree_hashes_per_s_arity8": tree_rate, "hashes_per_s_arity11": col11_rate,
            "device_busy_fraction": (engine == Pc2Engine::Gpu).then(|| bd.device.kernels / bd.total.max(1e-9)),
            "slot_read_bytes_per_s": read * 1e6, "predicted_seconds_per_32gib_sector": big,
            "ratio_vs_baseline": ratio, "breakdown_seconds": bd,
        }));
        notes += &format!(
            "sealfleet {}: waiting for layer reads {:.2} s, columns and trees {:.2} s (device kernels {:.2} s, copies {:.2} s, of which {:.2} s beside the column kernels), tree-d {:.2} s, of {:.2} s.\n",
            engine.as_str(),
            bd.read_wait,
            bd.columns_and_trees,
            bd.device.kernels,
            bd.device.transfers,
            bd.device.overlapped,
            bd.tree_d,
            bd.total
        );
    }
    if let Some(ours) = ours_gpu {
        let a = bench_peer::PeerArgs { sector_size, batch: n, dir, rate_hashes, sector: !random_layers };
        let peer = if bench_peer::BUILT {
            log::info!("pc2: filecoin-proofs' GPU path (a child process)…");
            bench_peer::spawn(&a)
        } else {
            Err(bench_peer::NOT_BUILT.to_string())
        };
        match peer {
            Err(why) => {
                table += &format!("| filecoin-proofs GPU (neptune via rust-gpu-tools) | {why} | | | | | | | |\n");
                rows.push(serde_json::json!({"engine": "filecoin-proofs-gpu", "error": why}));
            }
            Ok(p) => {
                let (row, json, note, mismatch) = peer_row(&p, ours, &baseline, nodes);
                table += &row;
                rows.push(json);
                notes += &note;
                mismatches.extend(mismatch);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(dir.join("pc2-sealer-layers"));
    if !mismatches.is_empty() {
        return Err(format!("{table}\n{notes}\nwrong outputs:\n{}", mismatches.join("\n")));
    }
    notes += match baseline {
        Baseline::FilecoinProofs { .. } => {
            "Every engine's comm_r of the first sector equals filecoin-proofs', and the engines' comm_rs equal each other's.\n"
        }
        Baseline::CpuRates(_) => "Random labels: no filecoin-proofs comparison; the engines run (if more than one) agree on every comm_r.\n",
    };
    Ok(format!("{table}\n{notes}BENCH_PC2_JSON {}\n", serde_json::Value::Array(rows)))
}

/// What the engines of `bench pc2` are compared with.
enum Baseline {
    /// filecoin-proofs' PC2 of the batch's first sector: its seconds and comm_r (hex).
    FilecoinProofs { pc2_seconds: f64, comm_r: String },
    /// The CPU engine's predicted seconds for a 32 GiB sector (random labels: no sector to compare).
    CpuRates(f64),
}

impl Baseline {
    /// How many times faster than the baseline a row is that takes `per` seconds per sector and
    /// predicts `big` seconds for a 32 GiB sector.
    fn ratio(&self, per: f64, big: f64) -> f64 {
        match self {
            Baseline::FilecoinProofs { pc2_seconds, .. } => pc2_seconds / per,
            Baseline::CpuRates(cpu_big) => cpu_big / big,
        }
    }
}

/// The sealer's GPU engine in `bench pc2`: what the filecoin-proofs GPU peer is set against.
#[derive(Clone, Copy)]
struct GpuFigures {
    seconds_per_sector: f64,
    predicted_32gib: f64,
}

/// The filecoin-proofs GPU peer's table row, JSON row and note, and its comm_r mismatch (its
/// sector must seal to filecoin-proofs' CPU comm_r).
fn peer_row(
    p: &bench_peer::PeerReport,
    ours: GpuFigures,
    baseline: &Baseline,
    nodes: u64,
) -> (String, serde_json::Value, String, Option<String>) {
    let big = big_sector_seconds(p.tree_hashes_per_s_arity8, p.hashes_per_s_arity11);
    let per = p.pc2.as_ref().map(|c| c.seconds);
    let mismatch = match (baseline, &p.pc2) {
        (Baseline::FilecoinProofs { comm_r, .. }, Some(c)) if c.comm_r != *comm_r => {
            Some(format!("filecoin-proofs gpu: comm_r {} != filecoin-proofs' CPU {comm_r}", c.comm_r))
        }
        _ => None,
    };
    // The peer seals a sector exactly where filecoin-proofs' CPU run did (not with random labels).
    let ratio = match (baseline, per) {
        (Baseline::FilecoinProofs { .. }, None) => f64::NAN,
        (_, per) => baseline.ratio(per.unwrap_or(f64::NAN), big),
    };
    let speedup_sector = per.map(|s| s / ours.seconds_per_sector);
    let speedup_big = big / ours.predicted_32gib;
    let device = p.devices.first().map_or("?", |d| d.as_str());
    let row = format!(
        "| filecoin-proofs GPU (neptune via rust-gpu-tools, {device}), 1 sector | {} | {} | {:.0} | {:.0} | – | – | {big:.0} | {ratio:.2}× |\n",
        per.map_or("–".into(), |s| format!("{s:.2}")),
        per.map_or("–".into(), |s| format!("{:.0}", nodes as f64 / s)),
        p.tree_hashes_per_s_arity8,
        p.hashes_per_s_arity11,
    );
    let note = format!(
        "sealfleet gpu vs filecoin-proofs gpu: {}{speedup_big:.2}× on a 32 GiB sector's predicted Poseidon seconds (the goal is ≥ 3×).\n",
        speedup_sector.map_or(String::new(), |x| format!("{x:.2}× per sector of PC2 (its comm_r equal to filecoin-proofs' CPU run), "))
    );
    let json = serde_json::json!({
        "engine": "filecoin-proofs-gpu", "device": device, "devices": p.devices,
        "seconds_per_sector": per, "column_hashes_per_s": per.map(|s| nodes as f64 / s),
        "tree_hashes_per_s_arity8": p.tree_hashes_per_s_arity8, "hashes_per_s_arity11": p.hashes_per_s_arity11,
        "predicted_seconds_per_32gib_sector": big, "ratio_vs_baseline": ratio,
        "sealfleet_gpu_speedup_per_sector": speedup_sector, "sealfleet_gpu_speedup_32gib": speedup_big,
    });
    (row, json, note, mismatch)
}

/// Seconds for a 32 GiB sector's PC2 hashing at these rates: 2^30 arity-11 column hashes, and
/// tree-c plus tree-r-last's 2 × (2^30 − 1) / 7 arity-8 hashes (the 8 base trees' roots combine
/// in one more).
fn big_sector_seconds(tree_rate: f64, col11_rate: f64) -> f64 {
    let big_nodes = ((32u64 << 30) / 32) as f64;
    big_nodes / col11_rate + 2.0 * (big_nodes - 1.0) / 7.0 / tree_rate
}

/// An engine's arity-8 and arity-11 Poseidon rates (hashes/s) on `count` random preimages, and
/// the name of what ran them.
fn poseidon_rates(engine: Pc2Engine, count: usize) -> Result<(f64, f64, String), String> {
    use rayon::prelude::*;
    let count = count.max(64);
    let mut s = 9u64;
    let input: Vec<u8> = (0..count * 11)
        .flat_map(|_| {
            let mut b = rand32(&mut s);
            b[31] &= 0x3f; // below the modulus
            b
        })
        .collect();
    let rate = |arity: usize, f: &dyn Fn(&[u8]) -> Result<(), String>| -> Result<f64, String> {
        let part = &input[..count * arity * 32];
        f(&part[..arity * 32 * 64])?; // warm up (kernel compilation, constants)
        let t = Instant::now();
        f(part)?;
        Ok(count as f64 / t.elapsed().as_secs_f64())
    };
    match engine {
        Pc2Engine::Cpu => {
            let fr = |b: &[u8]| -> blstrs::Scalar {
                use ff::PrimeField;
                Option::from(blstrs::Scalar::from_repr(b.try_into().unwrap())).unwrap()
            };
            let cpu = |arity: usize| {
                move |b: &[u8]| -> Result<(), String> {
                    b.par_chunks(arity * 32).for_each(|g| {
                        let xs: Vec<_> = g.chunks(32).map(fr).collect();
                        std::hint::black_box(if arity == 8 {
                            sealer_pc2::poseidon8(&xs)
                        } else {
                            sealer_pc2::poseidon11(&xs)
                        });
                    });
                    Ok(())
                }
            };
            let name = format!("neptune on {} CPUs", sealer_config::allowed_cpus().len());
            Ok((rate(8, &cpu(8))?, rate(11, &cpu(11))?, name))
        }
        Pc2Engine::Gpu => {
            let gpu = sealer_gpu::Gpu::open(sealer_pc2::engine::device_index().map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            let run = |arity: usize| {
                let gpu = &gpu;
                move |b: &[u8]| gpu.hash_groups(arity, b).map(|_| ()).map_err(|e| e.to_string())
            };
            let name = format!("OpenCL: {} ({})", gpu.info().name, gpu.info().kind);
            Ok((rate(8, &run(8))?, rate(11, &run(11))?, name))
        }
    }
}

/// `bench pc2-shape`'s report as a table, then one `BENCH_PC2_SHAPE_JSON` line with every
/// figure (the prepared GPU run keeps it).
pub fn shape_table(r: &sealer_pc2::shaped::ShapeReport) -> String {
    let st = &r.stages;
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let checked = &r.checked;
    format!(
        "PC2 of one base tree of a 32 GiB sector's shape: 2^{} leaves, {} layers, generated labels, on {}\n\
         ranges of {} nodes ({} ranges); device memory per range part {:.2} GiB, host layer buffers {:.2} GiB\n\
         \n\
         | stage | seconds |\n|---|---:|\n\
         | waiting for generated labels | {:.2} |\n\
         | hashing ranges (copies in, kernels, copies out) | {:.2} |\n\
         | of which device kernels | {:.2} |\n\
         | of which device copies | {:.2} |\n\
         | layer copies beside column kernels (device clock) | {:.2} |\n\
         | checking samples and building upper levels (beside hashing) | {:.2} |\n\
         | waiting for that | {:.2} |\n\
         | base tree, in all | {:.2} |\n\
         \n\
         device busy {:.0} %; {}\n\
         checked: {} columns, {} replica nodes, {} tree nodes, {} roots; {}\n\
         BENCH_PC2_SHAPE_JSON {}",
        r.leaves.trailing_zeros(),
        r.layers,
        r.devices.join(" + "),
        r.range,
        r.ranges,
        gib(r.device_memory_high_water_bytes),
        gib(r.host_buffer_bytes),
        st.generate_wait,
        st.hash,
        st.device.kernels,
        st.device.transfers,
        st.device.overlapped,
        st.check_and_build,
        st.check_wait,
        st.total,
        r.device_busy_fraction * 100.0,
        match r.predicted_seconds_per_32gib_sector {
            Some(s) => format!("a 32 GiB sector (8 base trees): {s:.0} s of PC2 Poseidon"),
            None => "no 32 GiB prediction: that needs 2^27 leaves and 11 layers".to_string(),
        },
        checked.columns,
        checked.replica,
        checked.tree_nodes,
        checked.roots,
        if r.mismatches.is_empty() {
            "all equal".to_string()
        } else {
            format!("MISMATCHES: {}", r.mismatches.join("; "))
        },
        serde_json::to_string(r).expect("report serialises")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(pc2: Option<(f64, &str)>) -> bench_peer::PeerReport {
        bench_peer::PeerReport {
            devices: vec!["GPU A".into()],
            tree_hashes_per_s_arity8: 9e6,
            hashes_per_s_arity11: 6e6,
            pc2: pc2.map(|(seconds, c)| bench_peer::PeerPc2 { seconds, comm_r: c.into() }),
        }
    }

    #[test]
    fn the_peer_row_sets_filecoin_proofs_gpu_against_the_sealers_gpu() {
        let ours = GpuFigures { seconds_per_sector: 0.5, predicted_32gib: 60.0 };
        let base = Baseline::FilecoinProofs { pc2_seconds: 4.0, comm_r: "aa".into() };
        let (row, json, note, mismatch) = peer_row(&peer(Some((2.0, "aa"))), ours, &base, 1 << 18);
        assert_eq!(mismatch, None);
        let big = big_sector_seconds(9e6, 6e6);
        assert!((json["sealfleet_gpu_speedup_32gib"].as_f64().unwrap() - big / 60.0).abs() < 1e-9);
        assert_eq!(json["sealfleet_gpu_speedup_per_sector"].as_f64(), Some(4.0));
        assert_eq!(json["ratio_vs_baseline"].as_f64(), Some(2.0)); // 4 s on the CPU, 2 s on the GPU
        assert!(row.contains("GPU A") && note.contains("4.00× per sector"), "{row}{note}");

        // A peer that seals to another comm_r than filecoin-proofs' CPU run is a wrong output.
        let (_, _, _, mismatch) = peer_row(&peer(Some((2.0, "bb"))), ours, &base, 1 << 18);
        assert!(mismatch.unwrap().contains("bb != filecoin-proofs' CPU aa"));

        // Random labels: rates only, set against the CPU engine's 32 GiB prediction.
        let (row, json, note, mismatch) = peer_row(&peer(None), ours, &Baseline::CpuRates(2.0 * big), 1 << 18);
        assert_eq!((mismatch, json["seconds_per_sector"].as_f64()), (None, None));
        assert_eq!(json["ratio_vs_baseline"].as_f64(), Some(2.0));
        assert!(row.contains("| – | – |") && !note.contains("per sector"), "{row}{note}");
    }
}
