//! How long PC2 of a batch takes, from four bounds: the hashing (kernels), the host-to-device
//! copies (GPU engine), the slot reads and the output writes. PC2 overlaps them (reads run a
//! range ahead, writes behind on writer threads, copies beside the kernels), so the batch takes
//! the largest. The operator's prediction (`internal/predict`) uses the same model; both sides'
//! tests check the examples in `contracts/pc2-bounds.json`.

use crate::output_bytes_per_sector;
use serde::Serialize;

/// The CPU engine's rate: sector bytes per CPU-second (`sealer bench pc2`: 4-9 s per 8 MiB
/// sector on 2 CPUs).
pub const CPU_SECTOR_BYTES_PER_CPU_SECOND: f64 = 786_432.0;
/// The GPU engine's arity-11 column hashes per second per device (H200 at db4a009).
pub const GPU_ARITY11_HASHES_PER_SECOND: f64 = 20.95e6;
/// The GPU engine's arity-8 tree hashes per second per device (H200 at db4a009).
pub const GPU_ARITY8_HASHES_PER_SECOND: f64 = 25.2e6;
/// Host-to-device copy bytes per second per device (the 32 GiB-shaped run's uploads: until
/// the copy probe of issue 52 measures the bus, the figure PC2 reaches today).
pub const GPU_COPY_BYTES_PER_SECOND: f64 = 8e9;

/// What bounds a batch's PC2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// Poseidon: the CPU cores, or the GPU kernels.
    Kernels,
    /// Layers up to the devices and trees back.
    Copies,
    /// The slot's reads from the layer devices.
    Reads,
    /// The replica's and trees' writes.
    Writes,
}

impl Bound {
    /// The name the contract and the operator use.
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Kernels => "kernels",
            Bound::Copies => "copies",
            Bound::Reads => "reads",
            Bound::Writes => "writes",
        }
    }
}

/// A batch and the machine it runs on.
#[derive(Clone, Copy, Debug)]
pub struct Pc2Input {
    /// Sector size, bytes.
    pub sector_size: u64,
    /// Sectors in the batch.
    pub sectors: usize,
    /// SDR layers.
    pub layers: usize,
    /// Hashing on GPUs (else on CPUs).
    pub gpu: bool,
    /// CPUs of the CPU engine.
    pub cpus: usize,
    /// GPUs of the GPU engine.
    pub gpus: usize,
    /// Sequential read bandwidth summed over the layer devices the slot stripes across, bytes
    /// per second (0: not measured; the reads bound is left out).
    pub read_bytes_per_second: f64,
    /// Sequential write bandwidth, the same way (0: not measured).
    pub write_bytes_per_second: f64,
}

/// Each bound's seconds for the whole batch, and the largest.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Pc2Bounds {
    /// Bytes PC2 reads: every layer of every sector.
    pub read_bytes: u64,
    /// Bytes PC2 writes: replica, tree-d, tree-c and tree-r-last of every sector.
    pub write_bytes: u64,
    /// Poseidon on the engine.
    pub kernel_seconds: f64,
    /// Copies to and from the GPUs (0 on the CPU engine).
    pub copy_seconds: f64,
    /// Slot reads (0: bandwidth not measured).
    pub read_seconds: f64,
    /// Output writes (0: bandwidth not measured).
    pub write_seconds: f64,
    /// The batch's PC2: the largest of the four.
    pub seconds: f64,
    /// Which one that is.
    pub bound: Bound,
}

/// PC2's bounds for `b`.
pub fn pc2_bounds(b: &Pc2Input) -> Pc2Bounds {
    let n = b.sectors as f64;
    let s = b.sector_size as f64;
    let nodes = s / 32.0;
    let read_bytes = b.sectors as u64 * b.layers as u64 * b.sector_size;
    // Replica + tree-d + tree-c + tree-r-last (no layer files, no 4 KiB of p_aux and t_aux).
    let per_sector = output_bytes_per_sector(b.sector_size, b.layers, false) - 4096;
    let write_bytes = b.sectors as u64 * per_sector;
    let (kernel_seconds, copy_seconds) = if b.gpu {
        let gpus = b.gpus.max(1) as f64;
        let kernels = n * (nodes / GPU_ARITY11_HASHES_PER_SECOND + 2.0 * nodes / 7.0 / GPU_ARITY8_HASHES_PER_SECOND);
        // The layers up; the replica and both trees back (tree-d is built on the host).
        let tree_d = (2 * (b.sector_size / 32) - 1) * 32;
        let back = b.sectors as u64 * (per_sector - tree_d);
        (kernels / gpus, (read_bytes + back) as f64 / (GPU_COPY_BYTES_PER_SECOND * gpus))
    } else {
        (n * s / (CPU_SECTOR_BYTES_PER_CPU_SECOND * b.cpus.max(1) as f64), 0.0)
    };
    let over = |bytes: u64, bw: f64| if bw > 0.0 { bytes as f64 / bw } else { 0.0 };
    let read_seconds = over(read_bytes, b.read_bytes_per_second);
    let write_seconds = over(write_bytes, b.write_bytes_per_second);
    let (bound, seconds) = [
        (Bound::Kernels, kernel_seconds),
        (Bound::Copies, copy_seconds),
        (Bound::Reads, read_seconds),
        (Bound::Writes, write_seconds),
    ]
    .into_iter()
    .fold((Bound::Kernels, f64::MIN), |best, c| if c.1 > best.1 { c } else { best });
    Pc2Bounds { read_bytes, write_bytes, kernel_seconds, copy_seconds, read_seconds, write_seconds, seconds, bound }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_the_contracts() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/pc2-bounds.json");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let m = &doc["model"];
        assert_eq!(m["cpu_sector_bytes_per_cpu_second"].as_f64(), Some(CPU_SECTOR_BYTES_PER_CPU_SECOND));
        assert_eq!(m["gpu_arity11_hashes_per_second"].as_f64(), Some(GPU_ARITY11_HASHES_PER_SECOND));
        assert_eq!(m["gpu_arity8_hashes_per_second"].as_f64(), Some(GPU_ARITY8_HASHES_PER_SECOND));
        assert_eq!(m["gpu_copy_bytes_per_second"].as_f64(), Some(GPU_COPY_BYTES_PER_SECOND));
        let examples = doc["examples"].as_array().unwrap();
        assert!(examples.len() >= 4);
        for e in examples {
            let size = e["sector_size"].as_u64().unwrap();
            let layers = sealer_config::SECTOR_SIZES.iter().find(|s| s.0 == size).unwrap().3;
            let got = pc2_bounds(&Pc2Input {
                sector_size: size,
                sectors: e["sectors"].as_u64().unwrap() as usize,
                layers,
                gpu: e["engine"] == "gpu",
                cpus: e["cpus"].as_u64().unwrap() as usize,
                gpus: e["gpus"].as_u64().unwrap() as usize,
                read_bytes_per_second: e["read_bytes_per_second"].as_f64().unwrap(),
                write_bytes_per_second: e["write_bytes_per_second"].as_f64().unwrap(),
            });
            let name = e["name"].as_str().unwrap();
            assert_eq!(
                (got.read_bytes, got.write_bytes),
                (e["read_bytes"].as_u64().unwrap(), e["write_bytes"].as_u64().unwrap()),
                "{name}"
            );
            for (k, v) in [
                ("kernel_seconds", got.kernel_seconds),
                ("copy_seconds", got.copy_seconds),
                ("read_seconds", got.read_seconds),
                ("write_seconds", got.write_seconds),
                ("seconds", got.seconds),
            ] {
                let want = e[k].as_f64().unwrap();
                assert!((v - want).abs() <= 1e-9 * want.max(1.0), "{name}: {k} {v} != {want}");
            }
            assert_eq!(got.bound.as_str(), e["bound"], "{name}");
        }
    }
}
