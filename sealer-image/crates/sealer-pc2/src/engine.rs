//! Where PC2's Poseidon runs: neptune on the CPU cores, or sealer-gpu on an OpenCL device.
//! Both write the same bytes to the same files; the GPU engine hashes a whole range of every
//! sector (columns, replica, every tree level the range holds) in one device pass.

use crate::writer::OutputFile;
use crate::TreeBuilder;
use sealer_config::Pc2Engine;
use sealer_error::SealerError;
use sealer_gpu::{DeviceInfo, Gpu, RangeInput, RangeOutput, RangeShape, Slot, NODE};
use std::collections::VecDeque;

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

/// What PC2 on the GPU engine takes for a batch: its range, how many ranges are on each device
/// at once, and the memory that takes.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GpuBudget {
    /// Nodes per range (a power of two dividing the base tree's leaves, at least a page).
    pub range: u64,
    /// Devices each range is split among.
    pub parts: usize,
    /// Ranges on each device at once: the device hashes one while the host checks and writes
    /// another ([`IN_FLIGHT`], or 1 where a device holds only one).
    pub in_flight: usize,
    /// Device memory each of them needs for one range's part, bytes: the layers, the data, the
    /// column hashes, the replica nodes and the tree levels. Each device holds `in_flight`.
    pub device_bytes: u64,
    /// Page-locked host memory, bytes: `in_flight + 1` sets of layer buffers (one read while
    /// the others are hashed), and on each device `in_flight + 1` sets of readbacks.
    pub host_bytes: u64,
}

/// Page-locked host memory the layer buffers may take.
const HOST_BUFFERS: u64 = 3 << 30;

/// Ranges in flight on each device, where its memory holds them.
pub const IN_FLIGHT: usize = 2;

/// The range for `devices` and what it needs: as many nodes as each device's memory holds
/// [`IN_FLIGHT`] times within half of it, its largest allocation and [`HOST_BUFFERS`] hold (a
/// device's part takes at most `layers + 5` nodes of device memory per sector-node, and
/// `IN_FLIGHT + 1` host sets at most `layers + 3`), a power
/// of two dividing `leaves`, at least a page (`npp` rows). `sealer plan` shows it; PC2 runs
/// with it. The operator recomputes it (internal/gpubudget: placement and the pod's memory
/// request); both sides' tests check the examples of contracts/pc2-gpu-budget.json.
pub fn gpu_budget(devices: &[DeviceInfo], leaves: u64, npp: u64, sectors: usize, layers: usize) -> GpuBudget {
    let per_node = (sectors * NODE) as u64;
    let flight = IN_FLIGHT as u64;
    let device = devices
        .iter()
        .map(|info| {
            let memory = (info.memory_bytes / 2 / flight) / (per_node * (layers as u64 + 5));
            memory.min(info.max_alloc_bytes / (per_node * layers as u64))
        })
        .min()
        .unwrap_or(1);
    let shared = 1u64 << (usize::BITS - 1 - devices.len().max(1).leading_zeros()); // devices a range is split among
                                                                                   // Each set: the layers, and at most 3 nodes of readbacks per row (both trees' levels and
                                                                                   // the replica).
    let host = HOST_BUFFERS / (per_node * (layers as u64 + 3) * (flight + 1));
    let fit = (device.saturating_mul(shared)).min(host).max(1);
    let pow2 = 1u64 << (63 - fit.leading_zeros());
    let range = pow2.min(leaves).max(npp.min(leaves));
    let parts = parts(range, devices.len());
    let part = range / parts as u64 * per_node;
    let device_bytes = part * (layers as u64 + 3) + 2 * part / 7;
    let smallest = devices.iter().map(|d| d.memory_bytes).min().unwrap_or(0);
    let in_flight = (smallest / 2 / device_bytes.max(1)).clamp(1, flight);
    let readbacks = 2 * part + 2 * part / 7;
    GpuBudget {
        range,
        parts,
        in_flight: in_flight as usize,
        device_bytes,
        host_bytes: (in_flight + 1)
            * (layers as u64 * range.div_ceil(npp) * sealer_storage::PAGE as u64 + parts as u64 * readbacks),
    }
}

/// [`gpu_budget`] on `gpus`.
pub(crate) fn gpu_budget_of(gpus: &[Gpu], leaves: u64, npp: u64, sectors: usize, layers: usize) -> GpuBudget {
    let infos: Vec<DeviceInfo> = gpus.iter().map(|g| g.info().clone()).collect();
    gpu_budget(&infos, leaves, npp, sectors, layers)
}

/// A test override of a positive count from the environment (`SEALER_TEST_GPU_RANGE`,
/// `SEALER_TEST_GPU_IN_FLIGHT`): tests run many small ranges, several at once.
pub(crate) fn test_override(name: &str) -> Result<Option<u64>, SealerError> {
    match std::env::var(name) {
        Ok(s) if !s.is_empty() => match s.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(SealerError::Input(format!("{name}={s:?}: give a positive count, or unset it"))),
        },
        _ => Ok(None),
    }
}

/// A range the devices have hashed and whose outputs are not written yet.
pub(crate) struct Hashed {
    /// The range's first node.
    v: u64,
    /// Each part's rows and outputs, in row order.
    parts: Vec<(usize, RangeOutput)>,
    /// CC: each part's replica `[sector][node]`, taken from the last layer on the host (the
    /// device does not send it back). Empty where the outputs hold it.
    replicas: Vec<Vec<u8>>,
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

    /// The range's first node and rows.
    pub(crate) fn span(&self) -> (u64, u64) {
        (self.v, self.parts.iter().map(|(c, _)| *c as u64).sum())
    }

    /// Check every part against its input ([`sealer_gpu::check_range`]) and, where the device
    /// did not send the replica back, take it from the inputs' last layer. A device that hashed
    /// wrongly fails PC2 with [`SealerError::Device`] (exit 8), naming the range and the device.
    pub(crate) fn check(&mut self, gpus: &[Gpu], inputs: &[RangeInput], salt: u64) -> Result<usize, SealerError> {
        let (v, cnt) = self.span();
        let mut checked = 0;
        for (p, ((_, out), input)) in self.parts.iter().zip(inputs).enumerate() {
            checked += sealer_gpu::check_range(input, out, salt ^ v ^ p as u64).map_err(|e| {
                SealerError::Device(format!(
                    "PC2's range of nodes {v}..{} on {} hashed wrongly: {e}. The device's results are refused; \
                     the batch fails before any output is renamed into place",
                    v + cnt,
                    gpus[p].info().name
                ))
            })?;
        }
        self.replicas = self
            .parts
            .iter()
            .zip(inputs)
            .filter(|((_, out), _)| out.tree_r(0).is_none())
            .map(|(_, r)| {
                let last = r.layers[r.layers.len() - 1];
                let mut rep = vec![0u8; r.count * r.sectors * NODE];
                for (s, sector) in rep.chunks_mut(r.count * NODE).enumerate() {
                    for (i, node) in sector.chunks_mut(NODE).enumerate() {
                        let at = (r.first_row + i) * r.row + s * NODE;
                        node.copy_from_slice(&last[at..at + NODE]);
                    }
                }
                rep
            })
            .collect();
        Ok(checked)
    }

    /// Part `p`'s replica, `[sector][node]`.
    pub(crate) fn replica(&self, p: usize) -> &[u8] {
        self.parts[p].1.tree_r(0).unwrap_or_else(|| &self.replicas[p])
    }
}

/// PC2's ranges in flight on the GPU engine's devices: up to `in_flight` ranges, each split
/// into parts, part `p` on a slot of device `p`. Dropped before the host memory its ranges
/// read: every slot waits for its copies first.
pub(crate) struct Pipeline<'g> {
    gpus: &'g [Gpu],
    /// `[device][slot]`.
    slots: Vec<Vec<Slot>>,
    /// Ranges submitted and not collected: first node, rows of each part, slot.
    queued: VecDeque<(u64, Vec<usize>, usize)>,
    next: usize,
}

impl<'g> Pipeline<'g> {
    /// `in_flight` slots on each of the first `parts` devices for parts of `shape`.
    pub(crate) fn new(gpus: &'g [Gpu], parts: usize, shape: RangeShape, in_flight: usize) -> Result<Self, SealerError> {
        let slots =
            gpus[..parts].iter().map(|g| g.slots(shape, in_flight).map_err(device_err)).collect::<Result<_, _>>()?;
        Ok(Pipeline { gpus, slots, queued: VecDeque::new(), next: 0 })
    }

    /// Whether every slot holds a range (collect before submitting another).
    pub(crate) fn full(&self) -> bool {
        self.queued.len() == self.slots[0].len()
    }

    /// Whether no range is in flight.
    pub(crate) fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// Enqueue one range starting at node `v`, part `p` (`inputs[p]`) on device `p`.
    ///
    /// # Safety
    /// The layer pages `inputs` borrow must stay alive and unchanged until this range is
    /// collected or the pipeline is dropped.
    pub(crate) unsafe fn submit(&mut self, inputs: &[RangeInput], v: u64) -> Result<(), SealerError> {
        assert!(!self.full(), "collect before submitting another range");
        let slot = self.next;
        for ((g, slots), input) in self.gpus.iter().zip(&mut self.slots).zip(inputs) {
            // SAFETY: passed on from the caller.
            unsafe { g.submit(&mut slots[slot], input) }.map_err(device_err)?;
        }
        self.queued.push_back((v, inputs.iter().map(|i| i.count).collect(), slot));
        self.next = (slot + 1) % self.slots[0].len();
        Ok(())
    }

    /// Wait for the oldest range in flight and hand over its outputs (not yet checked).
    pub(crate) fn collect(&mut self) -> Result<(Hashed, sealer_gpu::DeviceTime), SealerError> {
        let (v, counts, slot) = self.queued.pop_front().expect("a range in flight");
        let mut time = sealer_gpu::DeviceTime::default();
        let mut parts = Vec::with_capacity(counts.len());
        for ((g, slots), count) in self.gpus.iter().zip(&mut self.slots).zip(counts) {
            let out = g.collect(&mut slots[slot]).map_err(device_err)?;
            time += out.time;
            parts.push((count, out));
        }
        Ok((Hashed { v, parts, replicas: Vec::new() }, time))
    }
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
    for (p, (count, out)) in h.parts.iter().enumerate() {
        let per = count * NODE;
        for (s, rep) in replicas.iter().enumerate() {
            let Some(rep) = rep.as_ref().filter(|_| !lost[s] && !failed.iter().any(|(f, _)| *f == s)) else {
                continue;
            };
            let written = rep
                .write_at(&h.replica(p)[s * per..(s + 1) * per], first * NODE as u64)
                .and_then(|()| put_levels(&mut tc[s], |j| Some(out.tree_c(j)), out.levels(), *count, s))
                .and_then(|()| {
                    let level = |j: usize| if j == 0 { Some(h.replica(p)) } else { out.tree_r(j) };
                    put_levels(&mut tr[s], level, out.levels(), *count, s)
                });
            if let Err(e) = written {
                failed.push((s, e));
            }
        }
        first += *count as u64;
    }
    failed
}

/// Sector `s`'s part of `levels` levels computed on a device (`level(j)` is level j,
/// `[sector][node]` with `count / 8^j` nodes a sector, None where it was not read back: below
/// the tree's first stored level, where the builder keeps nothing) into its tree: the lower
/// levels as bytes, the top one through the builder, which goes on hashing above it.
pub(crate) fn put_levels<'a>(
    b: &mut TreeBuilder,
    level: impl Fn(usize) -> Option<&'a [u8]>,
    levels: usize,
    count: usize,
    s: usize,
) -> std::io::Result<()> {
    let part = |bytes: &'a [u8], j: usize| {
        let per = (count >> (3 * j)) * NODE;
        &bytes[s * per..(s + 1) * per]
    };
    let top = levels - 1;
    for j in 0..top {
        if let Some(bytes) = level(j) {
            b.put_level(j, part(bytes, j))?;
        }
    }
    let top_bytes = level(top).expect("the device's top level is always read back");
    for node in part(top_bytes, top).chunks(NODE) {
        let x = crate::fr_checked(node).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the device returned a tree node that is not a field element",
            )
        })?;
        b.push(top, x)?;
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
        // 128 x 32 GiB sectors on an H200-sized card: the 3 GiB of host buffers bound it, and
        // two ranges are on the card at once.
        let b = gpu_budget(&[device(140 * GIB, 35 * GIB)], 1 << 27, 1, 128, 11);
        assert_eq!((b.range, b.parts, b.in_flight), (1 << 14, 1, 2));
        assert!(b.host_bytes <= HOST_BUFFERS, "{b:?}");
        // 8 sectors on a 1 GiB card: the card bounds it, and its two ranges in flight take at
        // most half of it.
        let small = device(GIB, GIB / 4);
        let b = gpu_budget(std::slice::from_ref(&small), 1 << 27, 16, 8, 11);
        assert!(2 * b.device_bytes <= GIB / 2 && b.range >= 1 << 15 && b.in_flight == 2, "{b:?}");
        // Two such cards: each range is split in two, each card's part the same size.
        let two = gpu_budget(&[small.clone(), small], 1 << 27, 16, 8, 11);
        assert_eq!((two.range, two.parts, two.device_bytes), (2 * b.range, 2, b.device_bytes));
        // A card too small for even one page of rows: the range stays a page, and its part
        // needs more than the card has (sealer plan refuses it).
        let tiny = gpu_budget(&[device(1 << 19, 1 << 19)], 1 << 27, 16, 128, 11);
        assert_eq!((tiny.range, tiny.in_flight), (16, 1));
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
                in_flight: n(&e["in_flight"]) as usize,
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
