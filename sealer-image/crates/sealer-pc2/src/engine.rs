//! Where PC2's Poseidon runs: neptune on the CPU cores, or sealer-gpu on an OpenCL device.
//! Both write the same bytes to the same files; the GPU engine hashes a whole range of every
//! sector (columns, replica, every tree level the range holds) in one device pass.

use crate::{fr, losses::Losses, TreeBuilder};
use sealer_config::Pc2Engine;
use sealer_error::SealerError;
use sealer_gpu::{Gpu, RangeInput, RangeOutput, NODE};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// PC2's hashing engine for one run.
pub enum Engine {
    /// neptune on the CPU cores (rayon).
    Cpu,
    /// An OpenCL device (boxed: its queues and buffers dwarf the CPU variant).
    Gpu(Box<Gpu>),
}

/// The OpenCL device index from `SEALER_GPU_DEVICE` (None: the first GPU).
pub fn device_index() -> Result<Option<usize>, SealerError> {
    match std::env::var("SEALER_GPU_DEVICE") {
        Err(_) => Ok(None),
        Ok(s) if s.is_empty() => Ok(None),
        Ok(s) => s.parse().map(Some).map_err(|_| {
            SealerError::Input(format!(
                "SEALER_GPU_DEVICE={s:?} is not a device index; give the index `sealer capabilities` lists, or unset it for the first GPU"
            ))
        }),
    }
}

impl Engine {
    /// The engine a config asks for. `gpu` without a usable device is an error
    /// ([`SealerError::Device`], exit code 8), never the CPU engine.
    pub fn open(which: Pc2Engine) -> Result<Engine, SealerError> {
        match which {
            Pc2Engine::Cpu => Ok(Engine::Cpu),
            Pc2Engine::Gpu => {
                let gpu = Gpu::open(device_index()?).map_err(device_err)?;
                let i = gpu.info();
                log::info!(
                    "PC2 on OpenCL device {} ({}, {}, {} MiB, {} compute units)",
                    i.index,
                    i.name,
                    i.kind,
                    i.memory_bytes >> 20,
                    i.compute_units
                );
                Ok(Engine::Gpu(Box::new(gpu)))
            }
        }
    }
}

pub(crate) fn device_err(e: sealer_gpu::GpuError) -> SealerError {
    SealerError::Device(e.to_string())
}

/// Nodes per range for the GPU engine: as many as the device and the host buffers hold (the
/// range's inputs and outputs take about `layers + 5` nodes of device memory per sector-node,
/// two sets of layer pages on the host), a power of two dividing `leaves`, at least a page.
pub(crate) fn gpu_range(gpu: &Gpu, leaves: u64, npp: u64, sectors: usize, layers: usize) -> u64 {
    let info = gpu.info();
    let per_node = (sectors * NODE) as u64;
    let device = (info.memory_bytes / 2) / (per_node * (layers as u64 + 5));
    let one_alloc = info.max_alloc_bytes / (per_node * layers as u64);
    let host = (2u64 << 30) / (per_node * layers as u64 * 2);
    let fit = device.min(one_alloc).min(host).max(1);
    let pow2 = 1u64 << (63 - fit.leading_zeros());
    pow2.min(leaves).max(npp.min(leaves))
}

/// One range on the device, then each sector's replica nodes and tree levels into its files
/// (level 0..k-1 as bytes, the top level through the builder, which goes on hashing above it).
pub(crate) fn gpu_range_into(
    gpu: &Gpu,
    input: &RangeInput,
    v: u64,
    (tc, tr, replicas): (&mut [TreeBuilder], &mut [TreeBuilder], &[Option<File>]),
    losses: &mut Losses,
) -> Result<sealer_gpu::DeviceTime, SealerError> {
    let RangeOutput { tree_c, tree_r, time } = gpu.pc2_range(input).map_err(device_err)?;
    for s in 0..input.sectors {
        let Some(rep) = replicas[s].as_ref().filter(|_| !losses.is_lost(s)) else { continue };
        let per = input.count * NODE;
        let written = rep
            .write_all_at(&tree_r[0][s * per..(s + 1) * per], v * NODE as u64)
            .and_then(|()| put_levels(&mut tc[s], &tree_c, s, input.count))
            .and_then(|()| put_levels(&mut tr[s], &tree_r, s, input.count));
        if let Err(e) = written {
            losses.io(s, "writing its replica or trees", e);
        }
    }
    Ok(time)
}

/// Sector `s`'s part of levels computed on the device (each `[sector][node]`, `count / 8^j`
/// nodes a sector at level j) into its tree: the lower levels as bytes, the top one through
/// the builder, which goes on hashing above it.
pub(crate) fn put_levels(b: &mut TreeBuilder, levels: &[Vec<u8>], s: usize, count: usize) -> std::io::Result<()> {
    let part = |j: usize| {
        let per = (count >> (3 * j)) * NODE;
        &levels[j][s * per..(s + 1) * per]
    };
    let top = levels.len() - 1;
    for j in 0..top {
        b.put_level(j, part(j))?;
    }
    for node in part(top).chunks(NODE) {
        b.push(top, fr(node))?;
    }
    Ok(())
}
