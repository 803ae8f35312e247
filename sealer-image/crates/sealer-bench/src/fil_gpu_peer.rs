//! `sealer bench pc2`'s peer on the same GPU: filecoin-proofs' own GPU path.
//!
//! filecoin-proofs builds tree-c and tree-r-last on a GPU through neptune's batch hashers
//! (rust-gpu-tools, OpenCL in this build) where `FIL_PROOFS_USE_GPU_COLUMN_BUILDER` and
//! `FIL_PROOFS_USE_GPU_TREE_BUILDER` are set. It reads its settings once per process, so the peer
//! runs in a child process (`sealer bench fil-gpu-peer`) started with both set, and the bench
//! reads back one JSON line. The path exists only in a binary built with the `fil-gpu` feature
//! (`hack/gpu-bench.sh pack` builds one). rust-gpu-tools sees NVIDIA and AMD GPUs only; where it
//! finds none, filecoin-proofs quietly falls back to its CPU builders, so the peer refuses
//! instead of timing a CPU under a GPU's name.

use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

/// The line prefix of the child's report on stdout.
pub const JSON_PREFIX: &str = "BENCH_FIL_GPU_PEER_JSON ";

/// Whether this binary has the peer (built with the `fil-gpu` feature).
pub const BUILT: bool = cfg!(feature = "fil-gpu");

/// What the peer measured on its GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerReport {
    /// The GPUs rust-gpu-tools lists (neptune takes the first).
    pub devices: Vec<String>,
    /// neptune's GPU batcher at arity 8 (tree-c and tree-r-last levels), hashes/s, wall time of
    /// its calls (copies included, as the sealer's own rate in the same table).
    pub tree_hashes_per_s_arity8: f64,
    /// neptune's GPU batcher at arity 11 (tree-c's columns), hashes/s.
    pub hashes_per_s_arity11: f64,
    /// filecoin-proofs' PC2 of the bench's first sector with both GPU builders, where asked.
    pub pc2: Option<PeerPc2>,
}

/// filecoin-proofs' seal_pre_commit_phase2 of one sector on the GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerPc2 {
    /// Wall seconds of seal_pre_commit_phase2 (PC1 before it is not counted).
    pub seconds: f64,
    /// Its comm_r (hex): the bench checks it against filecoin-proofs' CPU run.
    pub comm_r: String,
}

/// What the peer runs.
pub struct PeerArgs<'a> {
    /// The bench's sector size in bytes.
    pub sector_size: u64,
    /// The bench's batch (the peer seals the batch's first sector, as filecoin-proofs' CPU row).
    pub batch: usize,
    /// The bench's work directory (the parent cache filecoin-proofs' CPU run made is reused).
    pub dir: &'a Path,
    /// Hashes per arity for the rates (the same count the sealer's engines are timed on).
    pub rate_hashes: usize,
    /// Also run PC1 (untimed) and PC2 (timed) of the first sector; else the rates alone.
    pub sector: bool,
}

/// Runs the peer in a child process of this binary with filecoin-proofs' GPU builders on. Its
/// log goes to this process's stderr; its error, if any, comes back as the error.
pub fn spawn(a: &PeerArgs) -> Result<PeerReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("fil-gpu peer: this binary's path: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", "fil-gpu-peer", "--sector-size", &a.sector_size.to_string(), "--batch"])
        .arg(a.batch.to_string())
        .arg("--dir")
        .arg(a.dir)
        .args(["--rate-hashes", &a.rate_hashes.to_string()])
        .env("FIL_PROOFS_USE_GPU_COLUMN_BUILDER", "1")
        .env("FIL_PROOFS_USE_GPU_TREE_BUILDER", "1");
    if !a.sector {
        cmd.arg("--rates-only");
    }
    let out = cmd.output().map_err(|e| format!("fil-gpu peer: start: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprint!("{stderr}");
    parse_report(out.status.success(), &String::from_utf8_lossy(&out.stdout), &stderr)
}

/// The child's report from its stdout, or why there is none (its last line of stderr).
pub fn parse_report(success: bool, stdout: &str, stderr: &str) -> Result<PeerReport, String> {
    let line = stdout.lines().find_map(|l| l.strip_prefix(JSON_PREFIX));
    match (success, line) {
        (true, Some(json)) => serde_json::from_str(json).map_err(|e| format!("fil-gpu peer: its report: {e}")),
        _ => {
            let why = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output");
            Err(format!("fil-gpu peer failed: {}", why.trim()))
        }
    }
}

/// The child's work: the rates of neptune's GPU batchers, then (where asked) filecoin-proofs'
/// PC1 and timed PC2 of the bench's first sector with both GPU builders on.
#[cfg(feature = "fil-gpu")]
pub fn measure(a: &PeerArgs) -> Result<PeerReport, String> {
    use ec_gpu_gen::rust_gpu_tools::Device;
    use generic_array::typenum::{U11, U8};
    use storage_proofs_core::settings::SETTINGS;

    let devices: Vec<String> = Device::all().iter().map(|d| d.name()).collect();
    if devices.is_empty() {
        return Err("rust-gpu-tools lists no GPU (it keeps NVIDIA and AMD GPUs only): filecoin-proofs would fall \
                    back to its CPU tree builders, so there is no GPU figure to measure"
            .into());
    }
    if !(SETTINGS.use_gpu_column_builder && SETTINGS.use_gpu_tree_builder) {
        return Err("FIL_PROOFS_USE_GPU_COLUMN_BUILDER=1 and FIL_PROOFS_USE_GPU_TREE_BUILDER=1 must be set for the \
                    peer (`sealer bench pc2 --engine gpu` starts it so)"
            .into());
    }
    log::info!("fil-gpu peer on {devices:?}: neptune's batcher rates…");
    let tree = batcher_rate::<U8>(SETTINGS.max_gpu_tree_batch_size as usize, a.rate_hashes)?;
    let col11 = batcher_rate::<U11>(SETTINGS.max_gpu_column_batch_size as usize, a.rate_hashes)?;
    let pc2 = if a.sector {
        let cfg = crate::slot::pc2_bench_config(a.sector_size, a.batch, a.dir)?;
        let work = a.dir.join("pc2-rfp-gpu");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
        log::info!("fil-gpu peer: filecoin-proofs PC1 (untimed) and PC2 on the GPU…");
        let o = sealer_oracle::precommit_sector(&cfg, &cfg.sectors[0], &work).map_err(|e| format!("{e:#}"))?;
        let _ = std::fs::remove_dir_all(&work);
        Some(PeerPc2 { seconds: o.pc2_seconds, comm_r: hex::encode(o.comm_r) })
    } else {
        None
    };
    Ok(PeerReport { devices, tree_hashes_per_s_arity8: tree, hashes_per_s_arity11: col11, pc2 })
}

/// Hashes/s of neptune's GPU batcher at arity `A` on `count` preimages, in calls of at most
/// `max_batch` (filecoin-proofs' own batch size), after one untimed call whose first outputs are
/// checked against neptune on the CPU: a peer that computes fast and wrong is refused.
#[cfg(feature = "fil-gpu")]
fn batcher_rate<A: neptune::Arity<blstrs::Scalar>>(max_batch: usize, count: usize) -> Result<f64, String> {
    use generic_array::{sequence::GenericSequence, GenericArray};
    use neptune::batch_hasher::Batcher;
    use neptune::poseidon::{Poseidon, PoseidonConstants};
    use neptune::BatchHasher;

    let arity = A::to_usize();
    let fail = |e: neptune::Error| format!("neptune's GPU batcher at arity {arity}: {e}");
    let count = count.max(64);
    let preimages: Vec<GenericArray<blstrs::Scalar, A>> = (0..count)
        .map(|i| GenericArray::generate(|j| blstrs::Scalar::from((i * arity + j) as u64 * 0x9e37_79b9 + 1)))
        .collect();
    let max_batch = max_batch.max(1);
    let mut batcher = Batcher::<blstrs::Scalar, A>::pick_gpu(max_batch).map_err(fail)?;
    let first = batcher.hash(&preimages[..max_batch.min(count)]).map_err(fail)?;
    let constants = PoseidonConstants::<blstrs::Scalar, A>::new();
    for (i, (p, got)) in preimages.iter().zip(&first).take(16).enumerate() {
        if Poseidon::new_with_preimage(p, &constants).hash() != *got {
            return Err(format!("neptune's GPU batcher at arity {arity}: hash {i} differs from neptune on the CPU"));
        }
    }
    let t = std::time::Instant::now();
    for chunk in preimages.chunks(max_batch) {
        std::hint::black_box(batcher.hash(chunk).map_err(fail)?);
    }
    Ok(count as f64 / t.elapsed().as_secs_f64())
}

/// Without the `fil-gpu` feature there is no peer to run.
#[cfg(not(feature = "fil-gpu"))]
pub fn measure(_: &PeerArgs) -> Result<PeerReport, String> {
    Err(NOT_BUILT.into())
}

/// Why a binary without the feature has no peer row.
pub const NOT_BUILT: &str =
    "not built into this binary: `hack/gpu-bench.sh pack` builds the sealer with the fil-gpu feature (filecoin-proofs/opencl)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_read_back_from_the_childs_stdout() {
        let r = PeerReport {
            devices: vec!["NVIDIA H200".into()],
            tree_hashes_per_s_arity8: 8.5e6,
            hashes_per_s_arity11: 6.0e6,
            pc2: Some(PeerPc2 { seconds: 1.5, comm_r: "ab".into() }),
        };
        let stdout = format!("noise\n{JSON_PREFIX}{}\n", serde_json::to_string(&r).unwrap());
        assert_eq!(parse_report(true, &stdout, ""), Ok(r));
    }

    #[test]
    fn a_failed_child_gives_its_last_words() {
        let err = parse_report(false, "", "INFO starting\nerror: rust-gpu-tools lists no GPU\n\n").unwrap_err();
        assert_eq!(err, "fil-gpu peer failed: error: rust-gpu-tools lists no GPU");
        // A child that exits 0 without a report is a failure too.
        assert!(parse_report(true, "nothing\n", "").unwrap_err().contains("no output"));
    }
}
