//! `sealer bench gpu-kernels`: the GPU engine's Poseidon kernels alone, per arity, on one
//! OpenCL device: hashes per second of kernel time, an estimate of the share of the device's
//! 32-bit integer multiply-add peak they reach, and the Poseidon seconds a 32 GiB sector would
//! take at those rates. Prints one JSON document (the prepared GPU run keeps it).

use serde::Serialize;

/// The targets of the kernels (issue: ≤ 60 s of Poseidon per 32 GiB sector), hashes/s.
const TARGETS: [(usize, f64); 2] = [(11, 21e6), (8, 30e6)];

/// 32-bit multiply-adds in one 256-bit Montgomery multiplication with 8 limbs of 32 bits
/// (ec-gpu-gen's OpenCL field code): 2 × 8² limb products, each a low and a high half, plus
/// the reduction's 8 quotient products.
const MADDS_PER_FIELD_MUL: u64 = 2 * 2 * 64 + 8;

/// 32-bit integer multiply-adds one NVIDIA compute unit (SM) issues per clock (the CUDA
/// guide's throughput table, compute capability 7.0 to 9.0); unknown for other vendors.
const NVIDIA_MADDS_PER_CU_CLOCK: u64 = 64;

/// One arity's figures.
#[derive(Serialize)]
pub struct ArityRate {
    #[serde(flatten)]
    rate: sealer_gpu::KernelRate,
    /// Estimated 32-bit multiply-adds per second the kernel issued.
    estimated_madds_per_s: f64,
    /// That over the device's estimated peak (None where the peak is unknown).
    estimated_peak_fraction: Option<f64>,
    /// The target rate, hashes/s (None for arity 2, a test size's).
    target_hashes_per_s: Option<f64>,
}

/// The whole report.
#[derive(Serialize)]
pub struct Report {
    device: sealer_gpu::DeviceInfo,
    /// Estimated peak 32-bit integer multiply-adds per second (compute units × clock × per-CU
    /// rate; None where the vendor's per-CU rate is not known here).
    estimated_peak_madds_per_s: Option<f64>,
    madds_per_field_mul: u64,
    arities: Vec<ArityRate>,
    /// 2^30 arity-11 column hashes and 2 × 2^30 / 7 arity-8 tree hashes at the measured rates.
    predicted_poseidon_seconds_per_32gib_sector: f64,
}

/// Measure on `gpu`: `groups` hashes per run, `runs` runs, for arities 2, 8 and 11.
pub fn run(gpu: &sealer_gpu::Gpu, groups: usize, runs: usize) -> Result<Report, sealer_gpu::GpuError> {
    let info = gpu.info().clone();
    let peak = info
        .vendor
        .to_ascii_lowercase()
        .contains("nvidia")
        .then_some(info.compute_units as f64 * info.clock_mhz as f64 * 1e6 * NVIDIA_MADDS_PER_CU_CLOCK as f64);
    let mut arities = Vec::new();
    for arity in [2usize, 8, 11] {
        let rate = gpu.kernel_rate(arity, groups, runs)?;
        let madds = rate.hashes_per_s * (rate.field_muls_per_hash * MADDS_PER_FIELD_MUL) as f64;
        arities.push(ArityRate {
            estimated_madds_per_s: madds,
            estimated_peak_fraction: peak.filter(|p| *p > 0.0).map(|p| madds / p),
            target_hashes_per_s: TARGETS.iter().find(|(a, _)| *a == arity).map(|(_, t)| *t),
            rate,
        });
    }
    let rate = |a: usize| arities.iter().find(|r| r.rate.arity == a).map_or(0.0, |r| r.rate.hashes_per_s);
    let nodes = (1u64 << 30) as f64;
    let predicted = nodes / rate(11) + 2.0 * nodes / 7.0 / rate(8);
    Ok(Report {
        device: info,
        estimated_peak_madds_per_s: peak,
        madds_per_field_mul: MADDS_PER_FIELD_MUL,
        arities,
        predicted_poseidon_seconds_per_32gib_sector: predicted,
    })
}
