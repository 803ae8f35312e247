//! `sealer bench synth`: SyntheticPoRep's synthetic proofs of a batch, filecoin-proofs'
//! `generate_synth_proofs` against the sealer's streaming writer in one run (wall time, CPU
//! time, peak RSS of each, the ratio, and whether the files are equal), and what the measured
//! rate predicts for 128 × 32 GiB sectors on 64 cores.

use crate::cpu_now;
use crate::slot::random_config;
use sealer_config::{ApiVersion, BatchConfig};
use sealer_oracle as oracle;
use sealer_pc1::Pc1Options;
use sealer_proofs::synth::{self, shape::Shape, SYNTH_PROOFS_FILE};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::Instant;

/// What a bench run does.
pub struct SynthBench<'a> {
    /// Sector size (2 KiB, 8 MiB or 512 MiB).
    pub sector_size: u64,
    /// Sectors in the batch.
    pub batch: usize,
    /// Sectors filecoin-proofs proves (its memory and time per sector are the same for each;
    /// 0 skips it).
    pub baseline_sectors: usize,
    /// Work directory (tmpfs measures the computation).
    pub dir: &'a Path,
}

/// One side's measurement.
struct Measured {
    wall: f64,
    cpu: f64,
    peak_rss: u64,
    sectors: usize,
    digests: Vec<[u8; 32]>,
}

/// The peak RSS of this process since [`reset_peak_rss`] (VmHWM, bytes).
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_owned))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|k| k.parse::<u64>().ok()))
        .map_or(0, |kib| kib << 10)
}

/// Start a new peak-RSS window (Linux: writing 5 to clear_refs resets VmHWM).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// SHA-256 of a file, then the file removed (an 8 MiB sector's is 6.2 GB: tmpfs holds one).
fn digest_and_remove(path: &Path) -> Result<[u8; 32], String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(|e| e.to_string())?;
    std::fs::remove_file(path).map_err(|e| e.to_string())?;
    Ok(h.finalize().into())
}

/// Run `prove` on sectors `0..sectors` and measure it; each file is hashed and removed outside
/// the measured time.
fn measure(
    cfg: &BatchConfig,
    sectors: usize,
    mut prove: impl FnMut(usize, &Path, &Path) -> anyhow::Result<()>,
) -> Result<Measured, String> {
    let mut m = Measured { wall: 0.0, cpu: 0.0, peak_rss: 0, sectors, digests: vec![] };
    for i in 0..sectors {
        let p = sealer_config::sector_paths(cfg, cfg.sectors[i].sector_id);
        reset_peak_rss();
        let (t0, c0) = (Instant::now(), cpu_now());
        prove(i, &p.cache, &p.sealed).map_err(|e| format!("sector {i}: {e:#}"))?;
        m.wall += t0.elapsed().as_secs_f64();
        m.cpu += cpu_now() - c0;
        m.peak_rss = m.peak_rss.max(peak_rss());
        m.digests.push(digest_and_remove(&p.cache.join(SYNTH_PROOFS_FILE))?);
    }
    Ok(m)
}

/// Arity-8 Poseidon hashes per CPU-second on this machine (one thread).
fn poseidon8_per_cpu_second() -> f64 {
    use blstrs::Scalar as Fr;
    let x: Vec<Fr> = (0..8u64).map(Fr::from).collect();
    let n = 1 << 13;
    let c0 = cpu_now();
    let mut acc = Fr::from(0u64);
    for _ in 0..n {
        acc += sealer_pc2::poseidon8(&x);
    }
    std::hint::black_box(acc);
    n as f64 / (cpu_now() - c0).max(1e-9)
}

/// Run the benchmark and render its table.
pub fn run(b: &SynthBench) -> Result<String, String> {
    let size_idx =
        sealer_config::SECTOR_SIZES.iter().position(|s| s.0 == b.sector_size).ok_or("unsupported sector size")?;
    std::fs::create_dir_all(b.dir).map_err(|e| e.to_string())?;
    oracle::set_cache_env(&b.dir.join("fil-cache"));
    let out = b.dir.join(format!("synth-n{}", b.batch));
    let layers_dir = b.dir.join("synth-layers");
    let _ = std::fs::remove_dir_all(&out);
    let cfg = random_config(b.sector_size, 10 + size_idx as u64, ApiVersion::V1_2_0, b.batch, 36, &layers_dir, &out);
    log::info!("synth: PC1 and PC2 of {} sectors (untimed)…", b.batch);
    // Untimed set-up: a node cache that keeps the previous layer in memory (two layers of the
    // batch), so that PC1 at 512 MiB does not wait on random parent reads from a file slot.
    let two_layers = 2 * b.sector_size * b.batch as u64;
    let tuning = sealer_slot::Tuning { ring_bytes: two_layers.max(1 << 30), ..Default::default() };
    sealer_pc1::run_pc1(&cfg, &Pc1Options { restart: true, tuning, ..Default::default() })
        .map_err(|e| format!("{e:#}"))?;
    let res = sealer_pc2::run_pc2(&cfg, true).map_err(|e| format!("{e:#}"))?;
    let commits: Vec<([u8; 32], [u8; 32])> = res
        .iter()
        .map(|r| {
            let h = |s: &str| -> [u8; 32] { hex::decode(s).expect("hex").try_into().expect("32 bytes") };
            (h(&r.comm_r), h(&r.comm_d))
        })
        .collect();
    // The sealer's writer reads the slot: the layer files wait aside for filecoin-proofs.
    let aside = |i: usize, back: bool| -> Result<(), String> {
        let p = sealer_config::sector_paths(&cfg, cfg.sectors[i].sector_id);
        for l in synth::layer_paths(&p.cache, cfg.num_layers()) {
            let kept = l.with_extension("aside");
            let (from, to) = if back { (&kept, &l) } else { (&l, &kept) };
            std::fs::rename(from, to).map_err(|e| format!("{}: {e}", from.display()))?;
        }
        Ok(())
    };
    for i in 0..b.batch {
        aside(i, false)?;
    }
    log::info!("synth: the sealer's streaming writer on {} sectors…", b.batch);
    let ours = measure(&cfg, b.batch, |i, cache, sealed| {
        synth::write_sector(&cfg, i, cache, sealed, commits[i].0, commits[i].1)
    })?;
    let base = b.baseline_sectors.min(b.batch);
    for i in 0..base {
        aside(i, true)?;
    }
    log::info!("synth: filecoin-proofs' generate_synth_proofs on {base} sectors…");
    let theirs = measure(&cfg, base, |i, cache, sealed| {
        synth::write_with_filecoin_proofs(&cfg, i, cache, sealed, commits[i].0, commits[i].1)
    })?;
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&layers_dir);
    Ok(render(b, &cfg, &ours, &theirs))
}

fn render(b: &SynthBench, cfg: &BatchConfig, ours: &Measured, theirs: &Measured) -> String {
    let cpus = sealer_config::allowed_cpus().len();
    let shape = Shape::of(b.sector_size, cfg.num_layers());
    let challenges = synth::cost(b.sector_size).map_or(0, |c| c.challenges);
    let row = |name: &str, m: &Measured| {
        let n = m.sectors.max(1) as f64;
        format!(
            "| {name} | {} | {:.1} | {:.1} | {:.0} | {:.0} |",
            m.sectors,
            m.wall / n,
            m.cpu / n,
            m.peak_rss as f64 / (1u64 << 20) as f64,
            challenges as f64 * n / m.wall.max(1e-9)
        )
    };
    let mut s = format!(
        "SyntheticPoRep proofs: {} B sectors ({challenges} challenges, {} B per record), batch of {}, {cpus} CPUs\n\
         | writer | sectors | s per sector | CPU-s per sector | peak RSS MiB | challenges/s |\n|---|---:|---:|---:|---:|---:|\n{}\n",
        b.sector_size,
        shape.record_bytes(),
        b.batch,
        row("sealfleet streaming writer (labels from the slot)", ours)
    );
    if theirs.sectors > 0 {
        s += &row("filecoin-proofs generate_synth_proofs", theirs);
        let per = |m: &Measured| m.cpu / m.sectors as f64;
        let equal = ours.digests.iter().zip(&theirs.digests).all(|(a, b)| a == b);
        s += &format!(
            "\n\nCPU-s per sector, sealfleet / filecoin-proofs: {:.3}×; wall: {:.3}×; files byte-equal on {} sectors: {}\n",
            per(ours) / per(theirs),
            (ours.wall / ours.sectors as f64) / (theirs.wall / theirs.sectors as f64),
            theirs.sectors,
            if equal { "yes" } else { "NO" }
        );
    } else {
        s += "\n\nfilecoin-proofs skipped (--baseline-sectors 0).\n";
    }
    // 128 × 32 GiB on 64 cores from the measured CPU-s per challenge, plus the tree-r-last
    // segment a 32 GiB challenge rebuilds (72 arity-8 hashes) at this machine's Poseidon rate.
    let per_challenge = ours.cpu / (ours.sectors.max(1) * challenges.max(1) as usize) as f64;
    let big = Shape::of(32 << 30, 11);
    let p8 = poseidon8_per_cpu_second();
    let big_per_challenge = per_challenge * big.record_bytes() as f64 / shape.record_bytes() as f64 + 72.0 / p8;
    let big_cpu = big_per_challenge * synth::SYNTH_CHALLENGES_MAX as f64;
    s += &format!(
        "Predicted for 128 × 32 GiB on 64 cores: {:.0} CPU-s per sector ({:.1} µs per challenge scaled by record size, \
         + 72 arity-8 Poseidon hashes at {p8:.0}/s), {:.0} s for the batch (filecoin-proofs' model: {:.0} CPU-s per sector, {:.0} s).\n",
        big_cpu,
        per_challenge * 1e6,
        big_cpu * 128.0 / 64.0,
        synth::FILECOIN_PROOFS_CPU_SECONDS_32GIB,
        synth::FILECOIN_PROOFS_CPU_SECONDS_32GIB * 128.0 / 64.0
    );
    s
}
