//! `sealer bench gpu-kernels`: the GPU engine's Poseidon kernels alone, per arity and per
//! kernel variant, on one OpenCL device: hashes per second of kernel time, an estimate of the
//! share of the device's 32-bit integer multiply-add peak they reach, and the Poseidon seconds a
//! 32 GiB sector would take at those rates. The baseline variant runs in the same process, so
//! the ratios are of the same card in the same minute. Prints one JSON document (the prepared
//! GPU run keeps it).

use sealer_gpu::{Gpu, Kernels};
use serde::Serialize;
use std::path::Path;

/// The targets of the kernels (issue: ≤ 60 s of Poseidon per 32 GiB sector), hashes/s.
const TARGETS: [(usize, f64); 2] = [(11, 21e6), (8, 30e6)];

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
    /// This rate over the baseline variant's at the same arity (None when not measured).
    vs_baseline: Option<f64>,
}

/// One kernel variant's figures, or why it could not be measured.
#[derive(Serialize)]
pub struct VariantReport {
    kernels: Kernels,
    /// Why the variant did not run (its build or self-check failed): None when it ran.
    error: Option<String>,
    arities: Vec<ArityRate>,
    /// 2^30 arity-11 column hashes and 2 × 2^30 / 7 arity-8 tree hashes at the measured rates.
    predicted_poseidon_seconds_per_32gib_sector: Option<f64>,
}

/// The whole report.
#[derive(Serialize)]
pub struct Report {
    device: sealer_gpu::DeviceInfo,
    /// Estimated peak 32-bit integer multiply-adds per second (compute units × clock × per-CU
    /// rate; None where the vendor's per-CU rate is not known here).
    estimated_peak_madds_per_s: Option<f64>,
    variants: Vec<VariantReport>,
    /// The default variant at arities 8 and 11 in work-groups of several sizes: hashes/s by
    /// size (a launch shape worth tuning shows here).
    local_sizes: Vec<sealer_gpu::KernelRate>,
    /// The default variant at arities 8 and 11 built under register caps (NVIDIA only): fewer
    /// registers let more work-groups share a compute unit, at the cost of spills.
    max_registers: Vec<RegisterCap>,
    /// The default variant's prediction (what PC2 runs).
    predicted_poseidon_seconds_per_32gib_sector: Option<f64>,
}

/// The default variant under one register cap.
#[derive(Serialize)]
pub struct RegisterCap {
    max_registers: u32,
    /// Why it was not measured (no cap on this device, or the build failed): None when it ran.
    error: Option<String>,
    /// Arities 8 and 11.
    rates: Vec<sealer_gpu::KernelRate>,
    /// Each arity's rate over the uncapped default variant's in the same run.
    vs_uncapped: Vec<Option<f64>>,
}

/// What to measure.
pub struct KernelBench<'a> {
    /// OpenCL device index (None: the first GPU).
    pub device: Option<usize>,
    /// Hashes per kernel run.
    pub groups: usize,
    /// Timed runs per arity.
    pub runs: usize,
    /// The variants, in the order measured.
    pub variants: &'a [Kernels],
    /// Where to write each variant's program binaries (`<variant>-arity<n>.bin`; PTX on NVIDIA).
    pub binaries: Option<&'a Path>,
    /// Work-group sizes to time the default variant in (besides the driver's choice).
    pub local_sizes: &'a [usize],
    /// Register caps to time the default variant under (NVIDIA only).
    pub max_registers: &'a [u32],
}

fn measure(gpu: &Gpu, b: &KernelBench, peak: Option<f64>) -> Result<Vec<ArityRate>, String> {
    let mut arities = Vec::new();
    for arity in [2usize, 8, 11] {
        let rate = gpu.kernel_rate(arity, b.groups, b.runs).map_err(|e| e.to_string())?;
        if let Some(dir) = b.binaries {
            let bin = gpu.program_binary(arity).map_err(|e| e.to_string())?;
            let path = dir.join(format!("{}-arity{arity}.bin", gpu.kernels().name()));
            std::fs::write(&path, bin).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        let madds = rate.hashes_per_s * rate.multiplications_per_hash.madds() as f64;
        arities.push(ArityRate {
            estimated_madds_per_s: madds,
            estimated_peak_fraction: peak.filter(|p| *p > 0.0).map(|p| madds / p),
            target_hashes_per_s: TARGETS.iter().find(|(a, _)| *a == arity).map(|(_, t)| *t),
            vs_baseline: None,
            rate,
        });
    }
    Ok(arities)
}

/// Measure every variant of `b` on one device. A variant that fails to build or to pass its
/// self-check is reported with its error; the others are still measured.
pub fn run(b: &KernelBench) -> Result<Report, sealer_gpu::GpuError> {
    let info = Gpu::open(b.device)?.info().clone();
    let peak = info
        .vendor
        .to_ascii_lowercase()
        .contains("nvidia")
        .then_some(info.compute_units as f64 * info.clock_mhz as f64 * 1e6 * NVIDIA_MADDS_PER_CU_CLOCK as f64);
    if let Some(dir) = b.binaries {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut variants: Vec<VariantReport> = b
        .variants
        .iter()
        .map(|&k| {
            let measured = Gpu::open_with(b.device, k).map_err(|e| e.to_string()).and_then(|g| measure(&g, b, peak));
            let (arities, error) = match measured {
                Ok(a) => (a, None),
                Err(e) => (Vec::new(), Some(e)),
            };
            let rate = |a: usize| arities.iter().find(|r| r.rate.arity == a).map(|r| r.rate.hashes_per_s);
            let nodes = (1u64 << 30) as f64;
            let predicted = rate(11).zip(rate(8)).map(|(r11, r8)| nodes / r11 + 2.0 * nodes / 7.0 / r8);
            VariantReport { kernels: k, error, arities, predicted_poseidon_seconds_per_32gib_sector: predicted }
        })
        .collect();
    let baseline: Vec<(usize, f64)> = variants
        .iter()
        .filter(|v| v.kernels == Kernels::Baseline)
        .flat_map(|v| v.arities.iter().map(|a| (a.rate.arity, a.rate.hashes_per_s)))
        .collect();
    for a in variants.iter_mut().flat_map(|v| v.arities.iter_mut()) {
        a.vs_baseline =
            baseline.iter().find(|(arity, r)| *arity == a.rate.arity && *r > 0.0).map(|(_, r)| a.rate.hashes_per_s / r);
    }
    let mut local_sizes = Vec::new();
    if !b.local_sizes.is_empty() {
        let gpu = Gpu::open_with(b.device, Kernels::Default)?;
        for arity in [8usize, 11] {
            for &l in b.local_sizes {
                match gpu.kernel_rate_shaped(arity, b.groups, b.runs, Some(l)) {
                    Ok(r) => local_sizes.push(r),
                    Err(e) => log::warn!("arity {arity} in work-groups of {l}: {e}"),
                }
            }
        }
    }
    let uncapped = |arity: usize| {
        variants
            .iter()
            .filter(|v| v.kernels == Kernels::Default)
            .flat_map(|v| &v.arities)
            .find(|a| a.rate.arity == arity)
            .map(|a| a.rate.hashes_per_s)
    };
    let max_registers = b
        .max_registers
        .iter()
        .map(|&cap| {
            let rates =
                Gpu::open_with(b.device, Kernels::Default).and_then(|g| g.with_max_registers(cap)).and_then(|g| {
                    [8usize, 11]
                        .into_iter()
                        .map(|arity| g.kernel_rate(arity, b.groups, b.runs))
                        .collect::<Result<Vec<_>, _>>()
                });
            match rates {
                Ok(rates) => RegisterCap {
                    max_registers: cap,
                    error: None,
                    vs_uncapped: rates
                        .iter()
                        .map(|r| uncapped(r.arity).filter(|u| *u > 0.0).map(|u| r.hashes_per_s / u))
                        .collect(),
                    rates,
                },
                Err(e) => RegisterCap {
                    max_registers: cap,
                    error: Some(e.to_string()),
                    rates: Vec::new(),
                    vs_uncapped: Vec::new(),
                },
            }
        })
        .collect();
    let predicted = variants
        .iter()
        .find(|v| v.kernels == Kernels::Default)
        .and_then(|v| v.predicted_poseidon_seconds_per_32gib_sector);
    Ok(Report {
        device: info,
        estimated_peak_madds_per_s: peak,
        variants,
        local_sizes,
        max_registers,
        predicted_poseidon_seconds_per_32gib_sector: predicted,
    })
}
