//! Where PC2's Poseidon runs: neptune on the CPU cores, or sealer-gpu on an OpenCL device.
//! Both write the same bytes to the same files; the GPU engine hashes a whole range of every
//! sector (columns, replica, every tree level the range holds) in one device pass.

use crate::writer::OutputFile;
use crate::{fr, TreeBuilder};
use sealer_config::Pc2Engine;
use sealer_error::SealerError;
use sealer_gpu::{DeviceInfo, Gpu, RangeInput, RangeOutput, NODE};

/// PC2's hashing engine for one run.
pub enum Engine {
    /// neptune on the CPU cores (rayon).
    Cpu,
    /// One or more OpenCL devices: each range's rows are split among them ([`parts`]).
    Gpu(Vec<Gpu>),
}

/// The OpenCL devices the GPU engine uses: `SEALER_GPU_DEVICES` (indices, comma-separated),
/// else `SEALER_GPU_DEVICE` (one), else (empty) every GPU the process sees: in a sealer pod,
/// the ones the kubelet granted it.
pub fn device_indices() -> Result<Vec<usize>, SealerError> {
    match std::env::var("SEALER_GPU_DEVICES") {
        Ok(s) if !s.trim().is_empty() => s
            .split(',')
            .map(|i| {
                i.trim().parse().map_err(|_| {
                    SealerError::Input(format!(
                        "SEALER_GPU_DEVICES={s:?}: {i:?} is not a device index; give indices `sealer capabilities` lists, comma-separated"
                    ))
                })
            })
            .collect(),
        _ => Ok(device_index()?.into_iter().collect()),
    }
}

/// How many devices share a range of `count` rows: the largest power of two at most
/// `devices` that divides `count` into parts of at least 8 rows. Equal parts give every part
/// the same tree levels, so their levels go into the trees part after part.
pub fn parts(count: u64, devices: usize) -> usize {
    let mut p = 1usize;
    while p * 2 <= devices && count.is_multiple_of(p as u64 * 2) && count / (p as u64 * 2) >= 8 {
        p *= 2;
    }
    p
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

/// The OpenCL devices the GPU engine would use here ([`device_indices`], else every GPU or
/// accelerator), without opening them; none is an error that says what the machine has.
pub fn chosen_devices() -> Result<Vec<DeviceInfo>, SealerError> {
    let all = sealer_gpu::devices();
    let indices = device_indices()?;
    let chosen: Vec<DeviceInfo> = if indices.is_empty() {
        all.iter().filter(|d| d.kind == "gpu" || d.kind == "accelerator").cloned().collect()
    } else {
        indices
            .iter()
            .map(|&i| {
                // Not listed: opening it says why (no OpenCL library, or no such device).
                all.get(i).cloned().ok_or_else(|| {
                    Gpu::open(Some(i)).err().map_or_else(
                        || SealerError::Device(format!("no usable OpenCL device: device {i} is not listed")),
                        device_err,
                    )
                })
            })
            .collect::<Result<_, _>>()?
    };
    if chosen.is_empty() {
        // The first GPU's error says what the machine has.
        return Err(Gpu::open(None)
            .err()
            .map_or_else(|| SealerError::Device("no usable OpenCL device: no OpenCL GPU here".into()), device_err));
    }
    Ok(chosen)
}

impl Engine {
    /// The engine a config asks for. `gpu` without a usable device is an error
    /// ([`SealerError::Device`], exit code 8), never the CPU engine.
    pub fn open(which: Pc2Engine) -> Result<Engine, SealerError> {
        match which {
            Pc2Engine::Cpu => Ok(Engine::Cpu),
            Pc2Engine::Gpu => {
                let gpus: Vec<Gpu> = chosen_devices()?
                    .iter()
                    .map(|d| Gpu::open(Some(d.index)).map_err(device_err))
                    .collect::<Result<_, _>>()?;
                for g in &gpus {
                    let i = g.info();
                    log::info!(
                        "PC2 on OpenCL device {} ({}, {}, {} MiB, {} compute units)",
                        i.index,
                        i.name,
                        i.kind,
                        i.memory_bytes >> 20,
                        i.compute_units
                    );
                }
                Ok(Engine::Gpu(gpus))
            }
        }
    }
}

pub(crate) fn device_err(e: sealer_gpu::GpuError) -> SealerError {
    SealerError::Device(e.to_string())
}

/// A host buffer of `bytes` for layer pages the GPU engine copies to its devices: page-locked
/// memory of the first device (copies from it run at the bus's speed, in the background),
/// starting at a page boundary for O_DIRECT reads; ordinary memory where the driver gives none.
pub(crate) fn host_buffer(gpus: &[Gpu], bytes: usize) -> sealer_storage::AlignedBuf {
    use sealer_storage::{AlignedBuf, PAGE};
    let cap = bytes.max(1).div_ceil(PAGE) * PAGE;
    match gpus.first().map(|g| g.pinned(cap + PAGE)) {
        Some(Ok(p)) => {
            let skip = p.as_mut_ptr().align_offset(PAGE);
            // SAFETY: p maps cap + PAGE zeroed bytes, so cap of them start at the page boundary
            // `skip` bytes in; they are used only through the returned buffer, which owns p.
            unsafe { AlignedBuf::from_owner(p.as_mut_ptr().add(skip), bytes, Box::new(p)) }
        }
        Some(Err(e)) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| log::warn!("no page-locked host memory ({e}): ordinary memory instead, slower copies"));
            AlignedBuf::new(bytes)
        }
        None => AlignedBuf::new(bytes),
    }
}

/// What PC2 on the GPU engine takes for a batch: its range, and the memory a range needs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GpuBudget {
    /// Nodes per range (a power of two dividing the base tree's leaves, at least a page).
    pub range: u64,
    /// Devices each range is split among.
    pub parts: usize,
    /// Device memory each of them needs for its part of a range, bytes: the layers, the data,
    /// the column hashes, the replica nodes and the tree levels.
    pub device_bytes: u64,
    /// Page-locked host memory of the layer buffers (two sets: one read while the other is
    /// hashed), bytes.
    pub host_bytes: u64,
}

/// Page-locked host memory the layer buffers may take.
const HOST_BUFFERS: u64 = 2 << 30;

/// The range for `devices` and what it needs: as many nodes as half of each device's memory,
/// its largest allocation and [`HOST_BUFFERS`] hold (a device's part takes at most `layers + 5`
/// nodes of device memory per sector-node), a power of two dividing `leaves`, at least a page
/// (`npp` rows). `sealer plan` shows it; PC2 runs with it. The operator recomputes it
/// (internal/gpubudget: placement and the pod's memory request); both sides' tests check the
/// examples of contracts/pc2-gpu-budget.json.
pub fn gpu_budget(devices: &[DeviceInfo], leaves: u64, npp: u64, sectors: usize, layers: usize) -> GpuBudget {
    let per_node = (sectors * NODE) as u64;
    let device = devices
        .iter()
        .map(|info| {
            let memory = (info.memory_bytes / 2) / (per_node * (layers as u64 + 5));
            memory.min(info.max_alloc_bytes / (per_node * layers as u64))
        })
        .min()
        .unwrap_or(1);
    let shared = 1u64 << (usize::BITS - 1 - devices.len().max(1).leading_zeros()); // devices a range is split among
    let host = HOST_BUFFERS / (per_node * layers as u64 * 2);
    let fit = (device.saturating_mul(shared)).min(host).max(1);
    let pow2 = 1u64 << (63 - fit.leading_zeros());
    let range = pow2.min(leaves).max(npp.min(leaves));
    let parts = parts(range, devices.len());
    let part = range / parts as u64 * per_node;
    GpuBudget {
        range,
        parts,
        device_bytes: part * (layers as u64 + 3) + 2 * part / 7,
        host_bytes: 2 * layers as u64 * range.div_ceil(npp) * sealer_storage::PAGE as u64,
    }
}

/// Nodes per range on `gpus` ([`gpu_budget`]).
pub(crate) fn gpu_range(gpus: &[Gpu], leaves: u64, npp: u64, sectors: usize, layers: usize) -> u64 {
    let infos: Vec<DeviceInfo> = gpus.iter().map(|g| g.info().clone()).collect();
    gpu_budget(&infos, leaves, npp, sectors, layers).range
}

/// A range the devices have hashed and whose outputs are not written yet.
pub(crate) struct Hashed {
    /// The range's first node.
    v: u64,
    /// Each part's rows and outputs, in row order.
    parts: Vec<(usize, RangeOutput)>,
}

impl Hashed {
    /// Each part's first node, rows and outputs, in order.
    pub(crate) fn parts(&self) -> impl Iterator<Item = (u64, usize, &RangeOutput)> {
        let mut first = self.v;
        self.parts.iter().map(move |(count, out)| {
            let f = first;
            first += *count as u64;
            (f, *count, out)
        })
    }
}

/// One range on the devices, part `p` (rows `[v + p·c, v + (p+1)·c)` of every sector) on
/// device `p`, all at once. The device time is summed over the devices.
pub(crate) fn gpu_range_hash(
    gpus: &[Gpu],
    inputs: &[RangeInput],
    v: u64,
) -> Result<(Hashed, sealer_gpu::DeviceTime), SealerError> {
    let outputs: Vec<Result<RangeOutput, sealer_gpu::GpuError>> = std::thread::scope(|sc| {
        let others: Vec<_> =
            inputs.iter().zip(gpus).skip(1).map(|(input, g)| sc.spawn(move || g.pc2_range(input))).collect();
        let first = gpus[0].pc2_range(&inputs[0]);
        std::iter::once(first).chain(others.into_iter().map(|h| h.join().expect("a device thread panicked"))).collect()
    });
    let outputs = outputs.into_iter().collect::<Result<Vec<_>, _>>().map_err(device_err)?;
    let mut time = sealer_gpu::DeviceTime::default();
    for out in &outputs {
        time += out.time;
    }
    Ok((Hashed { v, parts: inputs.iter().map(|i| i.count).zip(outputs).collect() }, time))
}

/// Each sector's replica nodes and tree levels of a hashed range into its files, part after
/// part (level 0..k-1 as bytes, the top level through the builder, which goes on hashing above
/// it); sectors `lost` are skipped. Runs while the devices hash the next range: it returns the
/// sectors whose writes failed instead of giving them up itself.
pub(crate) fn gpu_range_write(
    h: Hashed,
    (tc, tr, replicas): (&mut [TreeBuilder], &mut [TreeBuilder], &[Option<OutputFile>]),
    lost: &[bool],
) -> Vec<(usize, std::io::Error)> {
    let mut failed: Vec<(usize, std::io::Error)> = Vec::new();
    let mut first = h.v;
    for (count, out) in &h.parts {
        let per = count * NODE;
        for (s, rep) in replicas.iter().enumerate() {
            let Some(rep) = rep.as_ref().filter(|_| !lost[s] && !failed.iter().any(|(f, _)| *f == s)) else {
                continue;
            };
            let written = rep
                .write_at(&out.tree_r[0][s * per..(s + 1) * per], first * NODE as u64)
                .and_then(|()| put_levels(&mut tc[s], &out.tree_c, s, *count))
                .and_then(|()| put_levels(&mut tr[s], &out.tree_r, s, *count));
            if let Err(e) = written {
                failed.push((s, e));
            }
        }
        first += *count as u64;
    }
    failed
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

#[cfg(test)]
mod tests {
    use super::{gpu_budget, parts, GpuBudget, HOST_BUFFERS};
    use sealer_gpu::DeviceInfo;

    fn device(memory_bytes: u64, max_alloc_bytes: u64) -> DeviceInfo {
        DeviceInfo {
            index: 0,
            name: "test".into(),
            vendor: String::new(),
            kind: "gpu".into(),
            memory_bytes,
            max_alloc_bytes,
            compute_units: 1,
            driver: String::new(),
            clock_mhz: 0,
        }
    }

    #[test]
    fn a_range_fits_half_the_device_and_the_host_buffers() {
        const GIB: u64 = 1 << 30;
        // 128 x 32 GiB sectors on an H200-sized card: the 2 GiB of host buffers bound it.
        let b = gpu_budget(&[device(140 * GIB, 35 * GIB)], 1 << 27, 1, 128, 11);
        assert_eq!((b.range, b.parts), (1 << 14, 1));
        assert!(b.host_bytes <= 2 * GIB, "{b:?}");
        // 8 sectors on a 1 GiB card: the card bounds it, and a part takes at most half of it.
        let small = device(GIB, GIB / 4);
        let b = gpu_budget(std::slice::from_ref(&small), 1 << 27, 16, 8, 11);
        assert!(b.device_bytes <= GIB / 2 && b.range >= 1 << 16, "{b:?}");
        // Two such cards: each range is split in two, each card's part the same size.
        let two = gpu_budget(&[small.clone(), small], 1 << 27, 16, 8, 11);
        assert_eq!((two.range, two.parts, two.device_bytes), (2 * b.range, 2, b.device_bytes));
        // A card too small for even one page of rows: the range stays a page, and its part
        // needs more than the card has (sealer plan refuses it).
        let tiny = gpu_budget(&[device(1 << 19, 1 << 19)], 1 << 27, 16, 128, 11);
        assert_eq!(tiny.range, 16);
        assert!(tiny.device_bytes > 1 << 19, "{tiny:?}");
    }

    /// The operator recomputes the budget (internal/gpubudget) to book a GPU batch's memory:
    /// both sides check the examples of contracts/pc2-gpu-budget.json.
    #[test]
    fn the_budget_is_the_contracts() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/pc2-gpu-budget.json");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["host_buffer_bytes"].as_u64(), Some(HOST_BUFFERS));
        let n = |v: &serde_json::Value| v.as_u64().unwrap();
        for e in doc["examples"].as_array().unwrap() {
            let devices: Vec<DeviceInfo> = e["devices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| device(n(&d["memory_bytes"]), n(&d["max_alloc_bytes"])))
                .collect();
            let b = gpu_budget(
                &devices,
                n(&e["leaves"]),
                n(&e["npp"]),
                n(&e["sectors"]) as usize,
                n(&e["layers"]) as usize,
            );
            let want = GpuBudget {
                range: n(&e["range"]),
                parts: n(&e["parts"]) as usize,
                device_bytes: n(&e["device_bytes"]),
                host_bytes: n(&e["host_bytes"]),
            };
            assert_eq!(b, want, "{}: computed {}", e["what"], serde_json::to_string(&b).unwrap());
        }
    }

    #[test]
    fn a_range_is_split_into_equal_power_of_two_parts_of_at_least_8_rows() {
        assert_eq!(parts(1 << 16, 1), 1);
        assert_eq!(parts(1 << 16, 2), 2);
        assert_eq!(parts(1 << 16, 3), 2, "three devices: two share each range");
        assert_eq!(parts(1 << 16, 4), 4);
        assert_eq!(parts(64, 8), 8);
        assert_eq!(parts(64, 16), 8, "parts of at least 8 rows");
        assert_eq!(parts(8, 2), 1);
    }
}
