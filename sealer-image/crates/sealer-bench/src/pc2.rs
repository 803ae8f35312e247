//! `sealer bench pc2`: filecoin-proofs seal_pre_commit_phase2 (one sector) against the
//! sealer's PC2 engines on a batch, each engine's Poseidon rates, and the table of `bench
//! pc2-shape`.

use crate::fil_gpu_peer;
use crate::slot::{fill_random_layers, pc2_bench_config, rand32};
use sealer_config::Pc2Engine;
use sealer_oracle as oracle;
use sealer_pc1::Pc1Options;
use std::path::Path;
use std::time::Instant;

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
        // The audit needs real labels: on random layers their parents do not match.
        let audit = sealer_proofs::audit::Audit::new();
        let audit = (!random_layers).then_some(&audit as &dyn sealer_pc2::SectorAudit);
        let out = sealer_pc2::run_pc2_measured(&c, false, None, audit).map_err(|e| err(&e))?;
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
            "sealfleet {}: waiting for layer reads {:.2} s, columns and trees {:.2} s (device: column kernels {:.2} s, tree kernels {:.2} s, uploads {:.2} s, readbacks {:.2} s, {:.2} s of uploads beside column kernels; {} ranges at once, waiting for the oldest {:.2} s, {} nodes checked on the CPU), tree-d {:.2} s, audit {} of {:.2} s.\n",
            engine.as_str(),
            bd.read_wait,
            bd.columns_and_trees,
            bd.device.column_kernels,
            bd.device.tree_kernels,
            bd.device.uploads,
            bd.device.readbacks,
            bd.device.overlapped,
            bd.in_flight,
            bd.device_wait,
            bd.checked_nodes,
            bd.tree_d,
            if random_layers {
                "not run (random layers have no parents to check)".to_string()
            } else {
                format!("{:.3} s per sector ({:.2} % of PC2's)", bd.audit / n as f64, 100.0 * bd.audit / bd.total.max(1e-9))
            },
            bd.total
        );
    }
    if let Some(ours) = ours_gpu {
        let a = fil_gpu_peer::PeerArgs { sector_size, batch: n, dir, rate_hashes, sector: !random_layers };
        let peer = if fil_gpu_peer::BUILT {
            log::info!("pc2: filecoin-proofs' GPU path (a child process)…");
            fil_gpu_peer::spawn(&a)
        } else {
            Err(fil_gpu_peer::NOT_BUILT.to_string())
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
    p: &fil_gpu_peer::PeerReport,
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
         ranges of {} nodes ({} ranges, {} on each device at once); device memory {:.2} GiB, host layer buffers {:.2} GiB\n\
         \n\
         | stage | seconds |\n|---|---:|\n\
         | waiting for generated labels | {:.2} |\n\
         | submitting ranges and waiting for the oldest | {:.2} |\n\
         | device: column kernels | {:.2} |\n\
         | device: tree-level kernels | {:.2} |\n\
         | device: uploads | {:.2} |\n\
         | device: readbacks | {:.2} |\n\
         | layer copies beside column kernels (device clock) | {:.2} |\n\
         | checking samples and building upper levels (beside hashing) | {:.2} |\n\
         | waiting for that | {:.2} |\n\
         | base tree, in all | {:.2} |\n\
         \n\
         device busy {:.0} %; {}\n\
         checked: {} columns, {} tree nodes, {} roots; {}\n\
         BENCH_PC2_SHAPE_JSON {}",
        r.leaves.trailing_zeros(),
        r.layers,
        r.devices.join(" + "),
        r.range,
        r.ranges,
        r.in_flight,
        gib(r.device_memory_high_water_bytes),
        gib(r.host_buffer_bytes),
        st.generate_wait,
        st.hash,
        st.device.column_kernels,
        st.device.tree_kernels,
        st.device.uploads,
        st.device.readbacks,
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

    fn peer(pc2: Option<(f64, &str)>) -> fil_gpu_peer::PeerReport {
        fil_gpu_peer::PeerReport {
            devices: vec!["GPU A".into()],
            tree_hashes_per_s_arity8: 9e6,
            hashes_per_s_arity11: 6e6,
            pc2: pc2.map(|(seconds, c)| fil_gpu_peer::PeerPc2 { seconds, comm_r: c.into() }),
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
