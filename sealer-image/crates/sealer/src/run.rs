//! What each `sealer` subcommand does: one function per command, each returning the one
//! [`SealerError`] (its class is the exit code). Results go to stdout; batch results also to
//! the termination message and one `SEALER_RESULTS` line on stderr (see [`report_results`]);
//! `qualify`'s document likewise, with one `SEALER_QUALIFICATION` line (see [`qualify`]).

use crate::cli::{BenchCmd, Cmd, Pc1Flags, QualifyArgs};
use sealer_config::{BatchConfig, Layout, RegisteredProof};
use sealer_error::SealerError;
use sealer_pc1::{Pc1Options, Pc1Report};
use sealer_progress::{Progress, ProgressSink};
use std::path::{Path, PathBuf};

/// Run one parsed command.
pub fn run(cmd: Cmd) -> Result<(), SealerError> {
    match cmd {
        Cmd::Pc1 { config, flags, memory, restart } => {
            let cfg = load(&config.config)?;
            let mut opts = pc1_options(&flags, &cfg);
            opts.restart = restart;
            opts.tuning.ring_bytes = memory.cache_mib << 20;
            if memory.resident_mib > 0 {
                // The flag overrides the config's share (resident_bytes, booked by the operator).
                opts.tuning.resident_bytes = memory.resident_mib << 20;
            }
            pc1(&cfg, &opts)
        }
        Cmd::Pc2 { config, layer_files, term } => {
            let cfg = load_for_proofs(&config.config, !layer_files.no_layer_files)?;
            let sink = ProgressSink::new(&cfg, false)?;
            pc2_and_report(&cfg, !layer_files.no_layer_files, term.termination_log, None, &sink, &[])
        }
        Cmd::Batch { config, flags, layer_files, term } => {
            let mut cfg = BatchConfig::from_file(&config.config)?;
            let failed = triage_before_pc1(&mut cfg)?;
            check_proofs_need(&cfg, !layer_files.no_layer_files)?;
            use_node_parent_cache(&cfg);
            let opts = pc1_options(&flags, &cfg);
            let sink = ProgressSink::new(&cfg, !flags.quiet)?;
            let t = std::time::Instant::now();
            let pc1 = sealer_pc1::run_pc1_with(&cfg, &opts, Some(&sink))?;
            let pc1 = (pc1, t.elapsed().as_secs_f64());
            pc2_and_report(&cfg, !layer_files.no_layer_files, term.termination_log, Some(&pc1), &sink, &failed)
        }
        Cmd::VerifyPc1 { config, nodes, seed } => verify_pc1(&load(&config.config)?, nodes, seed),
        Cmd::LayerExport { config, out } => {
            let cfg = load(&config.config)?;
            let n = sealer_slot::export_layers(&cfg, &out)?;
            log::info!("exported {n} layers of {} sectors to {}", cfg.sectors.len(), out.display());
            Ok(())
        }
        Cmd::Stage { sector_size, pieces, out, sealbatch_file } => stage(sector_size, &pieces, out, sealbatch_file),
        Cmd::Capabilities { out } => capabilities(out.as_deref()),
        Cmd::Plan { config, rate, memory, layer_files, qualification, json } => {
            let cfg = load(&config.config)?;
            let storage = match &qualification {
                None => None,
                Some(path) => {
                    let src = path.display().to_string();
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| SealerError::Input(format!("--qualification {src}: {e}")))?;
                    let doc: serde_json::Value = serde_json::from_str(&text)
                        .map_err(|e| SealerError::Input(format!("--qualification {src}: not JSON: {e}")))?;
                    Some(
                        sealer::plan::StorageFigures::from_qualification(&cfg, &doc, &src)
                            .map_err(|e| SealerError::Input(format!("--qualification {e}")))?,
                    )
                }
            };
            let resident_bytes = if memory.resident_mib > 0 { memory.resident_mib << 20 } else { cfg.resident_bytes };
            let tuning =
                sealer_slot::Tuning { ring_bytes: memory.cache_mib << 20, resident_bytes, ..Default::default() };
            let p = sealer::plan::plan(&cfg, tuning, rate, !layer_files.no_layer_files, storage.as_ref());
            if json {
                println!("{}", pretty(&p));
            } else {
                print!("{}", sealer::plan::render(&p));
            }
            match p.ready() {
                true => Ok(()),
                false => Err(SealerError::Input("the batch is not ready on this machine (the table says why)".into())),
            }
        }
        Cmd::Snap { config, term } => {
            let (v, cfg) = snap(&config)?;
            report_results(&v, cfg.sectors.len(), &cfg.output_dir, term.termination_log);
            Ok(())
        }
        Cmd::C1 { config, seeds, term } => {
            let cfg = load(&config.config)?;
            use_node_parent_cache(&cfg);
            let v = c1_from_slot(&cfg, &seeds)?;
            report_results(&v, cfg.sectors.len(), &cfg.output_dir, term.termination_log);
            Ok(())
        }
        Cmd::OracleSnap { config, work } => {
            let text = std::fs::read_to_string(&config)
                .map_err(|e| SealerError::Input(format!("cannot read {}: {e}", config.display())))?;
            let cfg = sealer_config::SnapConfig::from_json(&text)?;
            let v = sealer_oracle::snap_update(&cfg, &work)
                .map_err(|e| SealerError::Internal(format!("oracle-snap: {e:#}")))?;
            println!("{}", pretty(&v));
            Ok(())
        }
        Cmd::Oracle { config, work } => {
            let cfg = load(&config.config)?;
            let v = sealer_oracle::precommit_batch(&cfg, &work)
                .map_err(|e| SealerError::Internal(format!("oracle: {e:#}")))?;
            println!("{}", pretty(&v));
            Ok(())
        }
        Cmd::ParentCache { proof, dir } => parent_cache(&proof, &dir),
        Cmd::Calc { batch_size, config } => {
            let layout = match config {
                Some(p) => load(&p)?.effective_layout(),
                None => Layout::default_for(batch_size),
            };
            println!("{}", pretty(&layout));
            Ok(())
        }
        Cmd::Qualify { args, term } => qualify(args, term.termination_log),
        Cmd::Bench { what } => bench(what),
    }
}

fn pretty(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).expect("serializable")
}

/// Load a config and compute its data sectors' comm_d from their pieces (refusing one that
/// differs from a given comm_d): nothing downstream sees a data sector without its comm_d.
fn load(path: &Path) -> Result<BatchConfig, SealerError> {
    let mut cfg = BatchConfig::from_file(path)?;
    if let Some(failed) = read_failed(&cfg)? {
        leave_out(&mut cfg, &failed); // `sealer batch` left them out: so do C1 and a PC2 rerun
    }
    sealer_data::resolve_comm_ds(&mut cfg)?;
    Ok(cfg)
}

/// [`load`] for the commands that may make proofs after PC2 (`pc2`, `batch`): an NI-PoRep
/// batch told to keep no layer files is refused before any work (filecoin-proofs' C1 reads
/// them; SyntheticPoRep's proofs read the slot when there are none), and storage-proofs reads
/// the node's parent cache.
fn load_for_proofs(path: &Path, layer_files: bool) -> Result<BatchConfig, SealerError> {
    let cfg = load(path)?;
    check_proofs_need(&cfg, layer_files)?;
    use_node_parent_cache(&cfg);
    Ok(cfg)
}

fn check_proofs_need(cfg: &BatchConfig, layer_files: bool) -> Result<(), SealerError> {
    if sealer_proofs::c1::enabled(cfg) && !layer_files {
        return Err(SealerError::Input(
            "NI-PoRep C1 outputs are made from the layer files after PC2: drop --no-layer-files".into(),
        ));
    }
    Ok(())
}

/// The record of the sectors a batch goes on without, in its output directory: a restarted
/// run (PC1 resumed, or PC2 again) seals the same fillers without checking the files again.
const FAILED_SECTORS_FILE: &str = "failed-sectors.json";

/// `sealer batch`, before PC1: every check of one sector alone ([`sealer_data::triage`]); a
/// sector that fails it is sealed as a CC filler (the batch keeps its size and slot layout)
/// whose outputs are discarded, and reported failed with its reason. A batch whose every
/// sector fails is refused (exit 7) with all the reasons, the slot untouched. A resumed run
/// takes the record of the first.
fn triage_before_pc1(cfg: &mut BatchConfig) -> Result<Vec<sealer_data::SectorFailure>, SealerError> {
    let record = cfg.output_dir.join(FAILED_SECTORS_FILE);
    let failed = match read_failed(cfg)? {
        Some(failed) => failed,
        None => {
            let t = std::time::Instant::now();
            // Labels already written were checked by the run that wrote them.
            let files = sealer_slot::layers_done(cfg) < cfg.num_layers();
            let failed = sealer_data::triage(cfg, files);
            if failed.len() == cfg.sectors.len() {
                let all: Vec<String> = failed.iter().map(|f| f.reason.clone()).collect();
                return Err(SealerError::DataMismatch(format!(
                    "every sector of the batch failed its checks, nothing to seal: {}",
                    all.join("; ")
                )));
            }
            let v: Vec<_> = failed
                .iter()
                .map(|f| serde_json::json!({"sector_id": f.sector_id, "class": f.class, "reason": f.reason}))
                .collect();
            std::fs::create_dir_all(&cfg.output_dir)
                .map_err(|e| SealerError::Io(format!("creating {}: {e}", cfg.output_dir.display())))?;
            write_atomically(&record, &serde_json::json!({ "sectors": v }).to_string())?;
            log::info!(
                "sector checks: {} of {} sectors failed ({:.1} s)",
                failed.len(),
                cfg.sectors.len(),
                t.elapsed().as_secs_f64()
            );
            failed
        }
    };
    for f in &failed {
        log::warn!("sector {} is left out of the batch ({}): {}", f.sector_id, f.class, f.reason);
    }
    leave_out(cfg, &failed);
    sealer_data::resolve_comm_ds(cfg)?;
    Ok(failed)
}

/// The batch's record of left-out sectors, when a `sealer batch` run wrote one.
fn read_failed(cfg: &BatchConfig) -> Result<Option<Vec<sealer_data::SectorFailure>>, SealerError> {
    let record = cfg.output_dir.join(FAILED_SECTORS_FILE);
    match std::fs::read_to_string(&record) {
        Ok(text) => parse_failed(&text).map(Some).map_err(|e| SealerError::Input(format!("{}: {e}", record.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SealerError::Io(format!("reading {}: {e}", record.display()))),
    }
}

/// Seal each failed sector as a CC filler in its column: its labels and outputs are thrown away.
fn leave_out(cfg: &mut BatchConfig, failed: &[sealer_data::SectorFailure]) {
    for f in failed {
        if let Some(s) = cfg.sectors.iter_mut().find(|s| s.sector_id == f.sector_id) {
            s.data = None;
            s.comm_d = None;
            cfg.fillers.insert(f.sector_id);
        }
    }
}

fn parse_failed(text: &str) -> Result<Vec<sealer_data::SectorFailure>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let class = |c: &str| sealer_data::SectorFailure::class_named(c).ok_or_else(|| format!("unknown class {c:?}"));
    v["sectors"]
        .as_array()
        .ok_or("no sectors list")?
        .iter()
        .map(|f| {
            Ok(sealer_data::SectorFailure {
                sector_id: f["sector_id"].as_u64().ok_or("sector_id")?,
                class: class(f["class"].as_str().unwrap_or_default())?,
                reason: f["reason"].as_str().unwrap_or_default().to_string(),
            })
        })
        .collect()
}

fn pc1_options(f: &Pc1Flags, cfg: &BatchConfig) -> Pc1Options {
    let mut opts = Pc1Options {
        allow_portable_hash: f.allow_portable_hash,
        pin_threads: !f.no_pin,
        progress_bar: !f.quiet,
        ..Default::default()
    };
    opts.tuning.resident_bytes = cfg.resident_bytes;
    opts
}

/// Point storage-proofs at the node's verified parent cache (read-only) for what it builds from
/// the graph after PC1 (synthetic proofs). Before anything reads its settings.
fn use_node_parent_cache(cfg: &BatchConfig) {
    if let Some(dir) = &cfg.parent_cache_dir {
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir);
    }
}

/// Before PC1 labels anything (a fresh or resumed run with layers left): every data sector's
/// staged file must be field elements whose tree-d root is the comm_d its pieces make, or the
/// batch fails here, with the slot untouched on a fresh run.
fn check_data_before_pc1(cfg: &BatchConfig) -> Result<(), SealerError> {
    if sealer_slot::layers_done(cfg) >= cfg.num_layers() {
        return Ok(());
    }
    let t = std::time::Instant::now();
    let n = sealer_data::check_data(cfg)?;
    if n > 0 {
        log::info!("data of {n} sectors matches their pieces' comm_d ({:.1} s)", t.elapsed().as_secs_f64());
    }
    Ok(())
}

/// `sealer pc1`: label the layers and print what the run did.
fn pc1(cfg: &BatchConfig, opts: &Pc1Options) -> Result<(), SealerError> {
    check_data_before_pc1(cfg)?;
    let r = sealer_pc1::run_pc1(cfg, opts)?;
    let sectors: Vec<_> = cfg
        .sectors
        .iter()
        .zip(r.replica_ids.iter().zip(r.comm_ds.iter()))
        .map(|(s, (rid, cd))| {
            serde_json::json!({"sector_id": s.sector_id, "replica_id": hex::encode(rid), "comm_d": hex::encode(cd)})
        })
        .collect();
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
        "sectors": sectors,
    });
    println!("{}", pretty(&out));
    Ok(())
}

/// PC2, then the proofs a SyntheticPoRep or NI-PoRep batch makes from its layers, then the
/// results. After PC1 in the same run (`sealer batch`: its report and wall seconds), the
/// results also say where PC1 ran (`cpus`, `buffers`) and how long each phase took
/// (`timings`: PC1's wall seconds around the whole PC1 call, PC2's around PC2 alone, without
/// the proofs after it). `sealer pc2` alone reports no `timings`. Progress goes to `sink`
/// (phase `pc2`, then `proofs` for SyntheticPoRep's synthetic proofs).
fn pc2_and_report(
    cfg: &BatchConfig,
    layer_files: bool,
    term: Option<PathBuf>,
    pc1: Option<&(Pc1Report, f64)>,
    sink: &ProgressSink,
    failed: &[sealer_data::SectorFailure],
) -> Result<(), SealerError> {
    let t = std::time::Instant::now();
    let audit = sealer_proofs::audit::Audit::new();
    let out = sealer_pc2::run_pc2_with(cfg, layer_files, Some(sink), Some(&audit))?;
    let pc2_seconds = t.elapsed().as_secs_f64();
    let mut res = out.results;
    res.retain(|r| !cfg.fillers.contains(&r.sector_id));
    // Left out before PC1, then given up in PC2 (a filler's failure is nobody's).
    let mut failed = failed.to_vec();
    failed.extend(out.failed.into_iter().filter(|f| !cfg.fillers.contains(&f.sector_id)));
    if proofs_after_pc2(cfg) {
        failed.extend(write_proofs(cfg, &mut res, sink)?);
    }
    if res.is_empty() {
        return Err(sealer_data::all_failed("every sector of the batch failed, nothing sealed", &failed));
    }
    let mut v = serde_json::json!({ "sectors": res });
    if !failed.is_empty() {
        // The fillers' outputs go; the left-out sectors are reported with their reasons.
        let _ = std::fs::remove_dir_all(cfg.output_dir.join(sealer_config::FILLER_DIR));
        let sectors = v["sectors"].as_array_mut().expect("a list");
        for f in &failed {
            sectors.push(serde_json::json!({"sector_id": f.sector_id, "failed": f.reason, "failure_class": f.class}));
        }
        write_atomically(
            &cfg.output_dir.join("results.json"),
            &serde_json::json!({ "sectors": v["sectors"] }).to_string(),
        )?;
    }
    if let Some(cpus) = pc1.and_then(|(r, _)| r.cpus.as_ref()) {
        v["cpus"] = serde_json::json!(cpus);
    }
    if let Some((r, pc1_seconds)) = pc1 {
        if let Some(b) = &r.buffers {
            v["buffers"] = serde_json::json!(b);
        }
        v["timings"] = serde_json::json!({"pc1_seconds": pc1_seconds, "pc2_seconds": pc2_seconds});
    }
    report_results(&v, res.len(), &cfg.output_dir, term);
    Ok(())
}

/// Print the results on stdout, as one `SEALER_RESULTS` line on stderr (the operator finds it
/// in the log when the termination message, 4 KiB, cannot hold a large batch's results), and
/// in the termination message (or there, only where `results.json` is).
fn report_results(v: &serde_json::Value, sectors: usize, output_dir: &Path, term: Option<PathBuf>) {
    println!("{}", pretty(v));
    eprintln!("SEALER_RESULTS {v}");
    if let Some(t) = term {
        let _ = std::fs::write(t, termination_message(v, sectors, output_dir));
    }
}

/// The results as the termination message holds them: whole, or where results.json is when
/// they are over Kubernetes' 4 KiB (the operator then reads the log's results line).
fn termination_message(v: &serde_json::Value, sectors: usize, output_dir: &Path) -> String {
    let s = v.to_string();
    if s.len() <= 4096 {
        return s;
    }
    serde_json::json!({"sectors": sectors, "results": output_dir.join("results.json")}).to_string()
}

/// Whether the batch makes proofs from its layers after PC2: SyntheticPoRep's vanilla proofs
/// or NI-PoRep's C1 outputs.
fn proofs_after_pc2(cfg: &BatchConfig) -> bool {
    sealer_proofs::synth::enabled(cfg) || sealer_proofs::c1::enabled(cfg)
}

/// SyntheticPoRep: every sector's vanilla proofs from its PC2 outputs, one sector after
/// another, published to `sink` as phase `proofs` (sector k of the batch, the ETA from
/// [`sealer_proofs::synth::seconds_per_sector`]); NI-PoRep: every sector's C1 output. Then
/// its layers go. A sector whose proofs fail is given up (taken out of `res`, its outputs
/// deleted: without its proofs it cannot be committed) and the others go on.
fn write_proofs(
    cfg: &BatchConfig,
    res: &mut Vec<sealer_pc2::SectorResult>,
    sink: &ProgressSink,
) -> Result<Vec<sealer_data::SectorFailure>, SealerError> {
    let hex32 = |s: &str| -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(&hex::decode(s).expect("PC2 wrote hex"));
        out
    };
    type WriteSector = fn(&BatchConfig, usize, &Path, &Path, [u8; 32], [u8; 32]) -> anyhow::Result<()>;
    let (what, write): (&str, WriteSector) = if sealer_proofs::c1::enabled(cfg) {
        ("C1 outputs (NI-PoRep)", sealer_proofs::c1::write_sector)
    } else {
        ("synthetic proofs", sealer_proofs::synth::write_sector)
    };
    let mut prog = sealer_proofs::synth::enabled(cfg)
        .then(|| Progress::for_proofs(cfg, sealer_proofs::synth::seconds_per_sector(cfg)));
    let mut failed = Vec::new();
    for (i, r) in res.iter().enumerate() {
        if let Some(prog) = &mut prog {
            prog.start_layer(i + 1);
            sink.publish(prog);
        }
        let p = sealer_config::sector_paths(cfg, r.sector_id);
        let index = cfg.sectors.iter().position(|s| s.sector_id == r.sector_id).expect("a sector of the batch");
        if let Err(e) = write(cfg, index, &p.cache, &p.sealed, hex32(&r.comm_r), hex32(&r.comm_d)) {
            let reason = format!("sector {}: writing its {what} failed: {e:#}", r.sector_id);
            log::warn!("{reason}; the other sectors go on");
            let _ = std::fs::remove_file(&p.sealed);
            let _ = std::fs::remove_dir_all(&p.cache);
            failed.push(sealer_data::SectorFailure { sector_id: r.sector_id, class: "io", reason });
        }
    }
    res.retain(|r| !failed.iter().any(|f| f.sector_id == r.sector_id));
    if let Some(prog) = &mut prog {
        if res.is_empty() {
            prog.fail(&format!("no sector's {what} could be written"));
        } else {
            prog.finish();
        }
        sink.publish(prog);
    }
    log::info!("{what} written for {} sectors; their layer files removed", res.len());
    Ok(failed)
}

/// `sealer verify-pc1`: the sampled labels as JSON; exit 5 when any does not match.
fn verify_pc1(cfg: &BatchConfig, nodes: usize, seed: Option<u64>) -> Result<(), SealerError> {
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    let r = sealer_pc1::verify_nodes(cfg, nodes, seed)?;
    let mismatches: Vec<_> = r
        .mismatches
        .iter()
        .map(|(l, v, s)| serde_json::json!({"layer": l, "node": v, "sector_id": cfg.sectors[*s].sector_id}))
        .collect();
    println!(
        "{}",
        serde_json::json!({"checked_nodes": r.checked, "sectors": cfg.sectors.len(), "seed": seed, "mismatches": mismatches})
    );
    match r.mismatches.len() {
        0 => Ok(()),
        n => Err(SealerError::VerifyMismatch(format!("{n} mismatching labels"))),
    }
}

/// `sealer stage`: the staged sector file, and its `data` for a config or a SealBatch.
fn stage(size: u64, pieces: &[PathBuf], out: PathBuf, sealbatch_file: Option<String>) -> Result<(), SealerError> {
    let refs: Vec<&Path> = pieces.iter().map(PathBuf::as_path).collect();
    let p = sealer_data::stage(size, &refs, &out)?;
    let comm_d = sealer_data::pieces_comm_d(size, &p).map_err(SealerError::Input)?;
    if sealbatch_file.is_some() {
        let pieces: Vec<_> =
            p.iter().map(|p| serde_json::json!({"cid": hex::encode(p.comm_p), "size": p.size})).collect();
        println!("{}", serde_json::json!({"file": sealbatch_file, "pieces": pieces}));
        return Ok(());
    }
    let pieces: Vec<_> =
        p.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect();
    let path = std::fs::canonicalize(&out).unwrap_or(out);
    println!("{}", pretty(&serde_json::json!({"path": path, "pieces": pieces, "comm_d": hex::encode(comm_d)})));
    Ok(())
}

/// The OpenCL device PC2's GPU engine opens here (the first GPU, or `SEALER_GPU_DEVICE`'s
/// index), as `sealer capabilities` lists it in `gpu_device` and `sealer qualify` in `gpu`;
/// else why none opens.
fn gpu_device() -> Result<sealer_gpu::DeviceInfo, String> {
    sealer_pc2::engine::device_index()
        .map_err(|e| e.to_string())
        .and_then(|i| sealer_gpu::Gpu::open(i).map_err(|e| e.to_string()))
        .map(|g| g.info().clone())
}

/// Write `text` to `path` whole or not at all, and durably (synced, renamed, directory synced).
fn write_atomically(path: &Path, text: &str) -> Result<(), SealerError> {
    sealer_storage::durable::replace(path, text.as_bytes())
        .map_err(|e| SealerError::io(&format!("writing {}", path.display()), e))
}

/// `sealer capabilities`: the document on stdout and, atomically, in `out`.
fn capabilities(out: Option<&Path>) -> Result<(), SealerError> {
    let gpu = gpu_device();
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
            v["gpu_device"] = serde_json::json!(g);
        }
        Err(e) => v["gpu_unavailable"] = e.into(),
    }
    v["pc2_engines"] = serde_json::json!(engines);
    let doc = pretty(&v);
    println!("{doc}");
    if let Some(path) = out {
        write_atomically(path, &doc)?;
    }
    Ok(())
}

/// `sealer qualify`: measure this node (`sealer-qualify`), then print the document on stdout,
/// one `SEALER_QUALIFICATION <json>` line on stderr (always: the operator reads it from the
/// log when the termination message cannot hold the document), write it atomically to `--out`
/// and to the termination log when it fits Kubernetes' 4 KiB (else a pointer:
/// `{"qualification": <--out or null>, "see": "SEALER_QUALIFICATION"}`). A device that fails
/// is in the document and the exit is 0; bad arguments are refused by the parser (exit 2),
/// and an `--out` that cannot be written exits 3 after the document was printed.
fn qualify(a: QualifyArgs, term: Option<PathBuf>) -> Result<(), SealerError> {
    let opts = sealer_qualify::Options {
        devices: a.devices,
        write_range: a.write_range,
        no_write_reason: a.no_write_reason,
        seconds: a.seconds,
        depth: a.depth,
        hugepages_probe: a.hugepages_probe,
        threads: a.threads.unwrap_or_else(sealer_qualify::default_threads),
        gpu: gpu_device().ok().map(|g| serde_json::json!(g)),
    };
    let doc = sealer_qualify::qualify(&opts);
    let line = serde_json::to_string(&doc).expect("serializable");
    println!("{}", pretty(&doc));
    eprintln!("SEALER_QUALIFICATION {line}");
    let written = a.out.as_deref().map(|p| write_atomically(p, &pretty(&doc)));
    if let Some(t) = term {
        let out = a.out.filter(|_| matches!(written, Some(Ok(()))));
        let msg = match line.len() <= 4096 {
            true => line,
            false => serde_json::json!({"qualification": out, "see": "SEALER_QUALIFICATION"}).to_string(),
        };
        let _ = std::fs::write(t, msg);
    }
    written.unwrap_or(Ok(()))
}

/// `sealer c1`: the seeds and PC2's commitments of each seeded sector, then C1 from the slot.
fn c1_from_slot(cfg: &BatchConfig, seeds_path: &Path) -> Result<serde_json::Value, SealerError> {
    let input = SealerError::Input;
    let text =
        std::fs::read_to_string(seeds_path).map_err(|e| input(format!("cannot read {}: {e}", seeds_path.display())))?;
    let seeds = sealer_proofs::c1::parse_seeds(&text).map_err(|e| input(format!("{}: {e}", seeds_path.display())))?;
    let results: serde_json::Value = std::fs::read_to_string(cfg.output_dir.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| input(format!("no results.json in {}: run PC2 first", cfg.output_dir.display())))?;
    let hex32 = |field: &str, v: &serde_json::Value| sealer_config::parse_hex32(field, v).map_err(SealerError::from);
    let mut seeded = Vec::new();
    for (i, (id, seed)) in seeds.into_iter().enumerate() {
        let index = cfg
            .sectors
            .iter()
            .position(|c| c.sector_id == id)
            .ok_or_else(|| input(format!("sectors[{i}].sector_id: sector {id} is not in the batch")))?;
        let r = results["sectors"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["sector_id"].as_u64() == Some(id)))
            .ok_or_else(|| input(format!("sector {id}: not in results.json (PC2 did not finish it)")))?;
        if let Some(why) = r["failed"].as_str() {
            return Err(input(format!("sector {id} failed and has no C1: {why}")));
        }
        seeded.push(sealer_proofs::c1::SeededSector {
            index,
            seed,
            comm_r: hex32("results comm_r", &r["comm_r"])?,
            comm_d: hex32("results comm_d", &r["comm_d"])?,
        });
    }
    let done = if sealer_proofs::synth::enabled(cfg) {
        sealer_proofs::c1::from_synthetic_proofs(cfg, &seeded)
    } else {
        let mut reader = sealer_slot::LayerReader::open(cfg)?;
        let parents = sealer_slot::open_parents(cfg)?;
        sealer_proofs::c1::from_slot(cfg, &seeded, &mut reader, &parents)
    }
    .map_err(|e| SealerError::Io(format!("{e:#}")))?;
    let sectors: Vec<_> =
        done.iter().map(|(id, p)| serde_json::json!({"sector_id": id, "c1_output": p.display().to_string()})).collect();
    Ok(serde_json::json!({ "sectors": sectors }))
}

/// `sealer snap`: check each sector's data against its pieces, encode them all, write
/// results.json. A sector whose own input or files fail (pieces, comm_d, sector key, data,
/// outputs) is left out with its reason and the others are updated; only a failure of them all,
/// or of the device, fails the update.
fn snap(path: &Path) -> Result<(serde_json::Value, sealer_config::SnapConfig), SealerError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SealerError::Input(format!("cannot read {}: {e}", path.display())))?;
    let cfg = sealer_config::SnapConfig::from_json(&text)?;
    let size = cfg.proof.sector_size;
    let mut sectors = Vec::with_capacity(cfg.sectors.len());
    let mut failed = Vec::new();
    for (i, s) in cfg.sectors.iter().enumerate() {
        let from_pieces = match sealer_data::pieces_comm_d(size, &s.data.pieces) {
            Ok(d) => d,
            Err(e) => {
                failed.push(sealer_data::SectorFailure::new(
                    s.sector_id,
                    "input",
                    format!("sectors[{i}].data.pieces: {e}"),
                ));
                continue;
            }
        };
        if let Some(given) = s.comm_d.filter(|g| *g != from_pieces) {
            let why = format!(
                "sectors[{i}].comm_d: sector {} gives comm_d {} but its pieces make {}",
                s.sector_id,
                hex::encode(given),
                hex::encode(from_pieces)
            );
            failed.push(sealer_data::SectorFailure::new(s.sector_id, "data-mismatch", why));
            continue;
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
            comm_r_old: s.comm_r_old,
        });
    }
    let mut res = Vec::new();
    if !sectors.is_empty() {
        let engine = sealer_pc2::engine::Engine::open(cfg.pc2_engine)?;
        let t = std::time::Instant::now();
        let audit = sealer_proofs::audit::Audit::new();
        for (s, r) in sectors.iter().zip(sealer_pc2::snap::encode_each(size, &sectors, &engine, Some(&audit))) {
            match r {
                Ok(r) => res.push(r),
                // The device is every sector's.
                Err(e @ SealerError::Device(_)) => return Err(e),
                Err(e) => {
                    let f = sealer_data::SectorFailure::of_error(s.sector.sector_id, &e);
                    log::warn!("sector {} is left out of the update ({}): {}", f.sector_id, f.class, f.reason);
                    let _ = std::fs::remove_file(&s.replica);
                    let _ = std::fs::remove_dir_all(&s.cache);
                    failed.push(f);
                }
            }
        }
        log::info!("{} sectors updated in {:.1} s", res.len(), t.elapsed().as_secs_f64());
    }
    if res.is_empty() {
        return Err(sealer_data::all_failed("every sector of the update failed, nothing updated", &failed));
    }
    let mut v = serde_json::json!({ "sectors": res });
    let entries = v["sectors"].as_array_mut().expect("a list");
    for f in &failed {
        entries.push(serde_json::json!({"sector_id": f.sector_id, "failed": f.reason, "failure_class": f.class}));
    }
    write_atomically(&cfg.output_dir.join("results.json"), &pretty(&v))?;
    Ok((v, cfg))
}

/// `sealer parent-cache`: keep the node's cache for a proof when it verifies, else build it.
fn parent_cache(p: &RegisteredProof, dir: &Path) -> Result<(), SealerError> {
    let proof = RegisteredProof::name_of(p.proof_id).expect("a parsed proof has a name");
    // storage-proofs-porep reads these once per process: the node's directory, and its own
    // manifest check for the graphs it knows.
    std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir);
    std::env::set_var("FIL_PROOFS_VERIFY_CACHE", "1");
    let porep_id = sealer_config::porep_id_for(p.proof_id);
    let api = sealer_slot::graph_api(p.api_version);
    let (m, outcome) = sealer_graph::store::build_or_verify(dir, &proof, p.sector_size / 32, porep_id, api)
        .map_err(|e| SealerError::Io(format!("parent cache for {proof}: {e}")))?;
    match &outcome {
        sealer_graph::store::CacheOutcome::Verified => log::info!("parent cache for {proof} verified"),
        sealer_graph::store::CacheOutcome::Built(None) => {
            log::info!("parent cache for {proof} built in {:.1} s", m.build_seconds)
        }
        sealer_graph::store::CacheOutcome::Built(Some(why)) => log::warn!("parent cache for {proof} rebuilt ({why})"),
    }
    println!("{}", pretty(&m));
    Ok(())
}

/// `sealer bench`: the tables, or the benchmark's failure (exit 1).
fn bench(what: BenchCmd) -> Result<(), SealerError> {
    let failed = |e: String| SealerError::Internal(format!("bench failed: {e}"));
    match what {
        BenchCmd::Pc2 { sector_size, batch, dir, engine, skip_cpu, random_layers, rate_hashes } => {
            let b = sealer_bench::pc2::Pc2Bench {
                sector_size,
                batch,
                dir: &dir,
                gpu: engine == "gpu",
                skip_cpu,
                random_layers,
                rate_hashes,
            };
            println!("{}", sealer_bench::pc2::run_pc2(&b).map_err(failed)?);
        }
        BenchCmd::FilGpuPeer { sector_size, batch, dir, rate_hashes, rates_only } => {
            let a = sealer_bench::fil_gpu_peer::PeerArgs {
                sector_size,
                batch,
                dir: &dir,
                rate_hashes,
                sector: !rates_only,
            };
            let report = sealer_bench::fil_gpu_peer::measure(&a).map_err(SealerError::Device)?;
            println!(
                "{}{}",
                sealer_bench::fil_gpu_peer::JSON_PREFIX,
                serde_json::to_string(&report).expect("a report serialises")
            );
        }
        BenchCmd::GpuCopies { mib } => {
            let g = sealer_gpu::Gpu::open(sealer_pc2::engine::device_index()?)
                .map_err(|e| SealerError::Device(e.to_string()))?;
            let rates = g.copy_probe(mib << 20).map_err(|e| SealerError::Device(e.to_string()))?;
            println!("{}", pretty(&serde_json::json!({"device": g.info(), "copies": rates})));
        }
        BenchCmd::GpuKernels { groups, runs, variants, binaries, local_sizes, max_registers } => {
            let b = sealer_bench::gpu_kernels::KernelBench {
                device: sealer_pc2::engine::device_index()?,
                groups,
                runs,
                variants: &variants,
                binaries: binaries.as_deref(),
                local_sizes: &local_sizes,
                max_registers: &max_registers,
            };
            let report = sealer_bench::gpu_kernels::run(&b).map_err(|e| SealerError::Device(e.to_string()))?;
            println!("{}", pretty(&report));
        }
        BenchCmd::Pc2Shape { leaves_log2, layers, samples, range_log2, seed } => {
            let sealer_pc2::engine::Engine::Gpu(gpus) =
                sealer_pc2::engine::Engine::open(sealer_config::Pc2Engine::Gpu)?
            else {
                unreachable!("the GPU engine or an error")
            };
            let shape = sealer_pc2::shaped::Shape { leaves_log2, layers, samples, range_log2, spoil: None, seed };
            let r = sealer_pc2::shaped::run(&gpus, &shape)?;
            println!("{}", sealer_bench::pc2::shape_table(&r));
            if !r.mismatches.is_empty() {
                return Err(SealerError::Internal(format!(
                    "the GPU engine's outputs differ from neptune's: {}",
                    r.mismatches.join("; ")
                )));
            }
        }
        BenchCmd::Pc2Io {
            sector_size,
            batch,
            layer_files,
            slot_offset_mib,
            request_kib,
            dir,
            hashing,
            rounds,
            json,
        } => {
            let o = sealer_bench::pc2_io::Options {
                sector_size,
                sectors: batch,
                place: sealer_bench::slot::SlotPlace {
                    files: layer_files as usize,
                    offset_pages: slot_offset_mib * 256,
                },
                dir: dir.clone(),
                request_bytes: request_kib.iter().map(|k| k << 10).collect(),
                hashing: match hashing.as_str() {
                    "cpu" => Some(sealer_config::Pc2Engine::Cpu),
                    "gpu" => Some(sealer_config::Pc2Engine::Gpu),
                    _ => None,
                },
                rounds,
            };
            let r = sealer_bench::pc2_io::run(&o).map_err(failed)?;
            let path = json.unwrap_or_else(|| dir.join("pc2-io.json"));
            sealer_bench::pc2_io::write_json(&r, &path).map_err(failed)?;
            println!("{}\nJSON: {}", sealer_bench::pc2_io::render(&r), path.display());
        }
        BenchCmd::Synth { sector_size, batch, baseline_sectors, dir } => {
            let b = sealer_bench::synth::SynthBench { sector_size, batch, baseline_sectors, dir: &dir };
            println!("{}", sealer_bench::synth::run(&b).map_err(failed)?);
        }
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
        } => {
            let o = sealer_bench::pc1::BenchOptions {
                sector_size,
                batches,
                dir,
                skip_baseline,
                sha_seconds,
                cache_bytes: cache_mib.iter().map(|m| m << 20).collect(),
                max_layers: (layers > 0).then_some(layers),
                hugepages,
                resident_percents: resident,
            };
            let rows = sealer_bench::pc1::run(&o).map_err(failed)?;
            println!("{}", sealer_bench::pc1::render(&rows, sector_size));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::termination_message;
    use std::path::Path;

    /// Results over 4 KiB leave a termination message with the keys of the contract's example
    /// 2 (contracts/sealer-results.json), which the operator takes as "read the log".
    #[test]
    fn large_results_leave_the_contracts_pointer() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/sealer-results.json");
        let contract: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let sector = serde_json::json!({"sector_id": 1, "comm_r": "ab".repeat(32), "comm_d": "cd".repeat(32)});
        let small = serde_json::json!({"sectors": [sector]});
        assert_eq!(termination_message(&small, 1, Path::new("/out")), small.to_string());
        let large = serde_json::json!({"sectors": vec![sector; 128]});
        let msg: serde_json::Value =
            serde_json::from_str(&termination_message(&large, 128, Path::new("/out"))).unwrap();
        let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&msg), keys(&contract["examples"][2]));
        assert_eq!(msg["results"], "/out/results.json");
    }

    /// `qualify`'s `gpu` is the device `capabilities` lists: sealer-gpu's DeviceInfo has exactly
    /// the keys of the qualification contract's example (contracts/sealer-qualification.json).
    #[test]
    fn qualify_lists_the_gpu_with_the_contracts_keys() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/sealer-qualification.json");
        let contract: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let info = sealer_gpu::DeviceInfo {
            index: 0,
            name: "GPU".into(),
            vendor: "vendor".into(),
            kind: "gpu".into(),
            memory_bytes: 1 << 34,
            max_alloc_bytes: 1 << 32,
            compute_units: 1,
            driver: "1".into(),
            clock_mhz: 1000,
        };
        let keys = |v: &serde_json::Value| {
            let mut k = v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
            k.sort();
            k
        };
        assert_eq!(keys(&serde_json::json!(info)), keys(&contract["examples"][0]["gpu"]));
    }
}
