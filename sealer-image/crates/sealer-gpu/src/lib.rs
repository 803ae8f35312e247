//! PC2's Poseidon on an OpenCL device: tree-c's column hashes, the replica (key + data) and
//! every level of the arity-8 trees that fits a range, computed on the device with no host
//! round trip between levels. Bit-identical to neptune (the constants are neptune's own,
//! flattened by [`constants`]; the field type is ec-gpu-gen's, the multiplication `mont.cl`'s).
//!
//! The OpenCL library is loaded at run time: a machine without `libOpenCL.so.1`, or without a
//! device, gets [`GpuError::NoDevice`] from [`Gpu::open`], never a silent CPU fallback. Any
//! OpenCL device works, including a CPU device such as pocl's (how the tests run without a
//! GPU); without an explicit device index only GPUs and accelerators are chosen.

#![warn(missing_docs)]

mod check;
mod constants;
mod pipeline;
mod probe;

pub use check::{check_range, SAMPLES as CHECK_SAMPLES};
pub use pipeline::{RangeOutput, RangeShape, Slot, MIN_DEVICE_LEVEL};
pub use probe::{CopyPath, CopyRate};

use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use generic_array::typenum::{U11, U2, U8};
use neptune::poseidon::PoseidonConstants;
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU};
use opencl3::event::Event;
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{cl_uint, CL_BLOCKING};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Bytes of one field element (one node).
pub const NODE: usize = 32;

/// Why the GPU engine cannot run.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No OpenCL library, no device, or not the device asked for.
    #[error("no usable OpenCL device: {0}")]
    NoDevice(String),
    /// The device does not take a build option a bench asked for (a register cap off NVIDIA).
    #[error("{0}")]
    Unsupported(String),
    /// The kernels did not compile for the device (the build log follows).
    #[error("building the Poseidon kernels for {device} failed: {log}")]
    Build {
        /// The device's name.
        device: String,
        /// The compiler's log.
        log: String,
    },
    /// The kernels built but hash wrongly on the device: its self-check against neptune failed,
    /// so nothing it computes is used.
    #[error("the Poseidon kernels (arity {arity}) hash wrongly on {device}: {detail}; the device is refused")]
    SelfCheck {
        /// The device's name.
        device: String,
        /// The arity whose program failed.
        arity: usize,
        /// Which hash differed, and how.
        detail: String,
    },
    /// An OpenCL call failed (out of device memory, device lost, ...).
    #[error("OpenCL {what} failed on {device}: {code}")]
    Call {
        /// What was being done.
        what: String,
        /// The device's name.
        device: String,
        /// The OpenCL error.
        code: String,
    },
}

/// One OpenCL device as the sealer lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DeviceInfo {
    /// Index in [`devices`]'s list (what `--gpu-device` takes).
    pub index: usize,
    /// The device's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Vendor.
    pub vendor: String,
    /// `gpu`, `cpu` or `accelerator`.
    pub kind: String,
    /// Global memory, bytes.
    pub memory_bytes: u64,
    /// Largest single buffer, bytes.
    pub max_alloc_bytes: u64,
    /// Compute units.
    pub compute_units: u32,
    /// Driver version.
    pub driver: String,
    /// Highest clock of its compute units, MHz (0 when the driver does not say).
    pub clock_mhz: u32,
}

fn kind_name(t: u64) -> &'static str {
    if t & CL_DEVICE_TYPE_GPU != 0 {
        "gpu"
    } else if t & CL_DEVICE_TYPE_ACCELERATOR != 0 {
        "accelerator"
    } else if t & CL_DEVICE_TYPE_CPU != 0 {
        "cpu"
    } else {
        "other"
    }
}

fn all_devices() -> Result<Vec<(Device, DeviceInfo)>, GpuError> {
    // The ICD loader's first enumeration is not thread-safe: two threads listing at once can
    // see no platforms at all. One lister at a time.
    static LISTING: Mutex<()> = Mutex::new(());
    let _one = LISTING.lock().unwrap_or_else(|e| e.into_inner());
    let platforms = opencl3::platform::get_platforms()
        .map_err(|e| GpuError::NoDevice(format!("cannot load libOpenCL.so.1 or list its platforms ({e})")))?;
    let mut out = Vec::new();
    for p in platforms {
        let ids = p.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_else(|e| {
            log::warn!("OpenCL platform {}: listing its devices failed: {e}", p.name().unwrap_or_default());
            Vec::new()
        });
        for id in ids {
            let d = Device::new(id);
            let info = DeviceInfo {
                index: out.len(),
                name: d.name().unwrap_or_default().trim().to_string(),
                vendor: d.vendor().unwrap_or_default().trim().to_string(),
                kind: kind_name(d.dev_type().unwrap_or(0)).to_string(),
                memory_bytes: d.global_mem_size().unwrap_or(0),
                max_alloc_bytes: d.max_mem_alloc_size().unwrap_or(0),
                compute_units: d.max_compute_units().unwrap_or(0),
                driver: d.driver_version().unwrap_or_default(),
                clock_mhz: d.max_clock_frequency().unwrap_or(0),
            };
            out.push((d, info));
        }
    }
    Ok(out)
}

/// Every OpenCL device on this machine (empty when there is no OpenCL library).
pub fn devices() -> Vec<DeviceInfo> {
    all_devices().map(|v| v.into_iter().map(|(_, i)| i).collect()).unwrap_or_default()
}

/// Which arithmetic the Poseidon kernels are built with (the same source, preprocessor
/// switches; see `mont.cl`). Every variant passes the self-check before it is used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernels {
    /// `mont.cl`: one reduction per matrix row, carry chains as PTX on NVIDIA.
    #[default]
    Default,
    /// `mont.cl` with its portable carry chains on every device (what pocl runs).
    Portable,
    /// ec-gpu-gen's multiplication for every product: the kernels before `mont.cl`, kept to
    /// measure the others against in the same run.
    Baseline,
}

impl Kernels {
    /// Every variant, the default first.
    pub const ALL: [Kernels; 3] = [Kernels::Default, Kernels::Portable, Kernels::Baseline];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kernels::Default => "default",
            Kernels::Portable => "portable",
            Kernels::Baseline => "baseline",
        }
    }

    /// The variant called `s`.
    pub fn parse(s: &str) -> Option<Kernels> {
        Kernels::ALL.into_iter().find(|k| k.name() == s)
    }

    fn build_options(self) -> &'static str {
        match self {
            Kernels::Default => "",
            Kernels::Portable => "-D SEALER_PORTABLE",
            Kernels::Baseline => "-D SEALER_BASELINE",
        }
    }
}

/// A compiled Poseidon program for one arity and its constants on the device.
struct Poseidon {
    program: Program,
    constants: Buffer<u8>,
}

/// Time the device spent in kernels and transfers for one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct DeviceTime {
    /// Seconds in kernels (columns and tree levels).
    pub kernels: f64,
    /// Seconds in host↔device copies (uploads and readbacks).
    pub transfers: f64,
    /// Seconds in host-to-device copies (layers and data).
    pub uploads: f64,
    /// Seconds in device-to-host copies (the stored rows).
    pub readbacks: f64,
    /// Seconds in the column kernels (tree-c's leaves and the replica).
    pub column_kernels: f64,
    /// Seconds in the tree-level kernels.
    pub tree_kernels: f64,
    /// Seconds, by the device's own clock, in which a layer copy and a column kernel of the
    /// same range ran at once (0: the copies and the kernels ran one after the other).
    pub overlapped: f64,
}

impl std::ops::AddAssign for DeviceTime {
    fn add_assign(&mut self, o: Self) {
        self.kernels += o.kernels;
        self.transfers += o.transfers;
        self.uploads += o.uploads;
        self.readbacks += o.readbacks;
        self.column_kernels += o.column_kernels;
        self.tree_kernels += o.tree_kernels;
        self.overlapped += o.overlapped;
    }
}

/// Nanoseconds covered by both `a` and `b`, each a set of `[start, end)` intervals in any
/// order, possibly overlapping among themselves.
pub fn overlap_ns(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    fn merged(v: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = v.iter().copied().filter(|(s, e)| e > s).collect();
        v.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (s, e) in v {
            match out.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        out
    }
    let (a, b) = (merged(a), merged(b));
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (s, e) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        total += e.saturating_sub(s);
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// Page-locked host memory from the device's driver ([`Gpu::pinned`]): copies from it to the
/// device run at the bus's speed and in the background, where copies from ordinary memory go
/// through the driver's own staging buffer (about 3 GB/s on an H200, measured). Mapped for as
/// long as it lives.
pub struct Pinned {
    buffer: Buffer<u8>,
    queue: CommandQueue,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is one allocation owned by this value (like a Box<[u8]>); the OpenCL
// handles are thread-safe reference-counted objects.
unsafe impl Send for Pinned {}
unsafe impl Sync for Pinned {}

impl Pinned {
    /// The mapped bytes' address (page-aligned where the driver says so; check before O_DIRECT).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr maps len bytes until Drop, and the slice borrows self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice; &mut self makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: ptr is this buffer's mapping, unmapped once.
        let unmapped = unsafe { self.queue.enqueue_unmap_mem_object(self.buffer.get(), self.ptr.cast(), &[]) };
        if unmapped.is_ok() {
            let _ = self.queue.finish();
        }
    }
}

/// One range of PC2 for every sector of a batch (see [`Gpu::pc2_range`]).
pub struct RangeInput<'a> {
    /// Each layer's pages for the range, in layer order (all the same length). Node `i` of
    /// sector `s` is at byte `(first_row + i) * row + s * 32`.
    pub layers: &'a [&'a [u8]],
    /// Bytes of one row (one node of every sector).
    pub row: usize,
    /// The range's first row within the pages.
    pub first_row: usize,
    /// Nodes in the range (a multiple of 8 or the whole tree).
    pub count: usize,
    /// Sectors in the batch.
    pub sectors: usize,
    /// Data sectors' fr32 data for the range, `[sector][node]`, 0 for CC sectors; None: all CC.
    pub data: Option<&'a [u8]>,
}

/// An OpenCL device with the Poseidon programs built on first use.
pub struct Gpu {
    info: DeviceInfo,
    context: Context,
    queue: CommandQueue,
    kernels: Kernels,
    /// Whether the compiler takes NVIDIA's `-cl-nv-*` options (`cl_nv_compiler_options`).
    nv_compiler_options: bool,
    /// The register cap the programs are built with (NVIDIA only; None: the compiler's choice).
    max_registers: Option<u32>,
    programs: Mutex<HashMap<usize, Arc<Poseidon>>>,
}

// The OpenCL objects are reference-counted handles the OpenCL runtime makes thread-safe
// (clEnqueue* and clCreate* may be called from any thread); the queue is used under `&self`
// by one PC2 pipeline at a time.
unsafe impl Send for Gpu {}
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Open device `index` of [`devices`] (any kind), or with None the first GPU or accelerator.
    pub fn open(index: Option<usize>) -> Result<Gpu, GpuError> {
        Gpu::open_with(index, Kernels::Default)
    }

    /// [`Gpu::open`] with the kernels built as `kernels` (benches compare the variants).
    pub fn open_with(index: Option<usize>, kernels: Kernels) -> Result<Gpu, GpuError> {
        let all = all_devices()?;
        let listing =
            || all.iter().map(|(_, i)| format!("{}: {} ({})", i.index, i.name, i.kind)).collect::<Vec<_>>().join(", ");
        let chosen = match index {
            Some(i) => all.get(i).ok_or_else(|| {
                GpuError::NoDevice(format!("there is no OpenCL device {i}; this machine has [{}]", listing()))
            })?,
            None => all.iter().find(|(_, i)| i.kind == "gpu" || i.kind == "accelerator").ok_or_else(|| {
                GpuError::NoDevice(format!(
                    "no OpenCL GPU on this machine (devices: [{}]); pass a device index to use another kind",
                    listing()
                ))
            })?,
        };
        let (device, info) = (chosen.0, chosen.1.clone());
        let call = |what: &str, e: opencl3::error_codes::ClError| GpuError::Call {
            what: what.into(),
            device: info.name.clone(),
            code: e.to_string(),
        };
        let context = Context::from_device(&device).map_err(|e| call("creating a context", e))?;
        let queue = CommandQueue::create_default(&context, CL_QUEUE_PROFILING_ENABLE)
            .map_err(|e| call("creating a queue", e))?;
        let nv_compiler_options =
            device.extensions().is_ok_and(|e| e.split_whitespace().any(|x| x == "cl_nv_compiler_options"));
        Ok(Gpu {
            info,
            context,
            queue,
            kernels,
            nv_compiler_options,
            max_registers: None,
            programs: Mutex::new(HashMap::new()),
        })
    }

    /// This device with its programs built to use at most `registers` registers per work-item
    /// (`-cl-nv-maxrregcount`; the compiler rounds up to a multiple of 4): more work-groups per
    /// compute unit, at the cost of spills. Benches measure it; only NVIDIA's compiler takes it.
    pub fn with_max_registers(mut self, registers: u32) -> Result<Gpu, GpuError> {
        if !self.nv_compiler_options {
            return Err(GpuError::Unsupported(format!(
                "{} does not take a register cap (no cl_nv_compiler_options: not NVIDIA's OpenCL)",
                self.info.name
            )));
        }
        self.max_registers = Some(registers.max(1));
        self.programs = Mutex::new(HashMap::new());
        Ok(self)
    }

    /// The device this engine runs on.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn call(&self, what: &str, e: impl std::fmt::Display) -> GpuError {
        GpuError::Call { what: what.into(), device: self.info.name.clone(), code: e.to_string() }
    }

    /// The program for `arity` (2, 8 or 11), compiled on first use and checked against neptune
    /// before anything it computes is used ([`GpuError::SelfCheck`] when it hashes wrongly).
    fn poseidon(&self, arity: usize) -> Result<Arc<Poseidon>, GpuError> {
        let mut programs = self.programs.lock().expect("program cache");
        if let Some(p) = programs.get(&arity) {
            return Ok(p.clone());
        }
        let flat = match arity {
            2 => constants::flatten(&PoseidonConstants::<Fr, U2>::new()),
            8 => constants::flatten(&PoseidonConstants::<Fr, U8>::new()),
            11 => constants::flatten(&PoseidonConstants::<Fr, U11>::new()),
            a => panic!("no Poseidon program for arity {a}"),
        };
        let src = source(&flat);
        let options = match self.max_registers {
            Some(n) => format!("{} -cl-nv-maxrregcount={n}", self.kernels.build_options()),
            None => self.kernels.build_options().to_string(),
        };
        let program = Program::create_and_build_from_source(&self.context, &src, &options)
            .map_err(|log| GpuError::Build { device: self.info.name.clone(), log })?;
        let mut bytes = flat.bytes.clone();
        if std::env::var_os("SEALER_TEST_GPU_BAD_CONSTANT").is_some() {
            // Tests only: a wrong round constant, which the self-check must refuse.
            bytes[NODE] ^= 1;
        }
        let mut constants = self.buffer(bytes.len())?;
        self.write(&mut constants, &bytes)?;
        let p = Arc::new(Poseidon { program, constants });
        self.self_check(arity, &p)?;
        programs.insert(arity, p.clone());
        Ok(p)
    }

    /// Build (and self-check) the programs for `arities` now rather than on first use. A cold
    /// build is the driver compiling the kernels, about 10 s an arity on an H200 (the driver
    /// keeps them in its cache, so a second process builds them in well under a second).
    pub fn prepare(&self, arities: &[usize]) -> Result<(), GpuError> {
        arities.iter().try_for_each(|&a| self.poseidon(a).map(|_| ()))
    }

    /// `len` bytes of page-locked host memory on this device's context, zeroed.
    pub fn pinned(&self, len: usize) -> Result<Pinned, GpuError> {
        let len = len.max(1);
        let buffer = unsafe {
            Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, len, std::ptr::null_mut())
        }
        .map_err(|e| self.call(&format!("allocating {len} bytes of page-locked host memory"), e))?;
        let queue = CommandQueue::create_default(&self.context, 0).map_err(|e| self.call("creating a queue", e))?;
        let mut ptr = std::ptr::null_mut();
        unsafe { queue.enqueue_map_buffer(&buffer, CL_BLOCKING, CL_MAP_READ | CL_MAP_WRITE, 0, len, &mut ptr, &[]) }
            .map_err(|e| self.call("mapping page-locked host memory", e))?;
        let mut p = Pinned { buffer, queue, ptr: ptr.cast(), len };
        p.as_mut_slice().fill(0);
        Ok(p)
    }

    /// The compiled program for `arity` as the driver keeps it (PTX on NVIDIA), for profiling
    /// with the vendor's tools.
    pub fn program_binary(&self, arity: usize) -> Result<Vec<u8>, GpuError> {
        let p = self.poseidon(arity)?;
        let binaries = p.program.get_binaries().map_err(|e| self.call("reading the program binary", e))?;
        Ok(binaries.into_iter().next().unwrap_or_default())
    }

    /// The kernel variant this device runs.
    pub fn kernels(&self) -> Kernels {
        self.kernels
    }

    /// Hash [`SELF_CHECK_GROUPS`] groups of fixed inputs (0, 1, p - 1 and a spread of others)
    /// on the device and compare each digest with neptune's on the host.
    fn self_check(&self, arity: usize, p: &Poseidon) -> Result<(), GpuError> {
        let input: Vec<Fr> = (0..SELF_CHECK_GROUPS * arity as u64)
            .map(|i| match i {
                0 => Fr::ZERO,
                1 => Fr::ONE,
                2 => -Fr::ONE,
                _ => Fr::from(i).pow_vartime([(i * 0x9e37_79b9_7f4a_7c15) | 1]),
            })
            .collect();
        let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_repr()).collect();
        let mut inb = self.buffer(bytes.len())?;
        self.write(&mut inb, &bytes)?;
        let n = SELF_CHECK_GROUPS as usize;
        let out = self.buffer(n * NODE)?;
        self.hash_level(p, &inb, &out, n)?;
        let (got, _) = self.read(&out, n * NODE)?;
        for (g, (want, digest)) in neptune_hashes(arity, &input).iter().zip(got.chunks(NODE)).enumerate() {
            let want = want.to_repr();
            if digest != want.as_ref() {
                return Err(GpuError::SelfCheck {
                    device: self.info.name.clone(),
                    arity,
                    detail: format!(
                        "hash {g} of {n} is {} where neptune gives {}",
                        hex_of(digest),
                        hex_of(want.as_ref())
                    ),
                });
            }
        }
        log::debug!("{}: arity-{arity} kernels pass their self-check ({n} hashes)", self.info.name);
        Ok(())
    }

    fn buffer(&self, bytes: usize) -> Result<Buffer<u8>, GpuError> {
        // A zero-sized buffer is invalid in OpenCL; absent inputs get one node.
        unsafe { Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, bytes.max(NODE), std::ptr::null_mut()) }
            .map_err(|e| self.call(&format!("allocating {bytes} bytes"), e))
    }

    fn write(&self, buf: &mut Buffer<u8>, data: &[u8]) -> Result<Event, GpuError> {
        unsafe { self.queue.enqueue_write_buffer(buf, CL_BLOCKING, 0, data, &[]) }
            .map_err(|e| self.call("copying to the device", e))
    }

    fn read(&self, buf: &Buffer<u8>, bytes: usize) -> Result<(Vec<u8>, Event), GpuError> {
        let mut out = vec![0u8; bytes];
        let ev = unsafe { self.queue.enqueue_read_buffer(buf, CL_BLOCKING, 0, &mut out, &[]) }
            .map_err(|e| self.call("copying from the device", e))?;
        Ok((out, ev))
    }

    fn kernel(&self, p: &Poseidon, name: &str) -> Result<Kernel, GpuError> {
        Kernel::create(&p.program, name).map_err(|e| self.call(&format!("creating kernel {name}"), e))
    }

    fn wait(&self, ev: &Event, what: &str) -> Result<f64, GpuError> {
        ev.wait().map_err(|e| self.call(what, e))?;
        Ok(seconds(ev))
    }

    /// `out[g] = H(in[arity*g .. arity*g + arity])` for every group of `input` (a batch of
    /// Poseidon hashes with neptune's Merkle-tree constants).
    pub fn hash_groups(&self, arity: usize, input: &[u8]) -> Result<(Vec<u8>, DeviceTime), GpuError> {
        assert_eq!(input.len() % (arity * NODE), 0, "input is whole groups of {arity} nodes");
        let n = input.len() / (arity * NODE);
        let p = self.poseidon(arity)?;
        let mut time = DeviceTime::default();
        let mut inb = self.buffer(input.len())?;
        time.transfers += seconds(&self.write(&mut inb, input)?);
        let out = self.buffer(n * NODE)?;
        time.kernels += self.hash_level(&p, &inb, &out, n)?;
        let (bytes, ev) = self.read(&out, n * NODE)?;
        time.transfers += seconds(&ev);
        Ok((bytes, time))
    }

    fn hash_level(&self, p: &Poseidon, input: &Buffer<u8>, out: &Buffer<u8>, n: usize) -> Result<f64, GpuError> {
        self.hash_level_shaped(p, input, out, n, None)
    }

    /// `hash_level` in work-groups of `local` (None: the driver's choice); the global size is
    /// rounded up to whole groups, the kernel skips the ids past `n`.
    fn hash_level_shaped(
        &self,
        p: &Poseidon,
        input: &Buffer<u8>,
        out: &Buffer<u8>,
        n: usize,
        local: Option<usize>,
    ) -> Result<f64, GpuError> {
        if n == 0 {
            return Ok(0.0);
        }
        let k = self.kernel(p, "hash_groups")?;
        let mut exec = ExecuteKernel::new(&k);
        unsafe {
            exec.set_arg(input).set_arg(out).set_arg(&(n as cl_uint)).set_arg(&p.constants);
        }
        match local {
            Some(l) => exec.set_global_work_size(n.div_ceil(l) * l).set_local_work_size(l),
            None => exec.set_global_work_size(n),
        };
        let ev = unsafe { exec.enqueue_nd_range(&self.queue) }.map_err(|e| self.call("running hash_groups", e))?;
        self.wait(&ev, "running hash_groups")
    }

    /// The kernels' speed for `arity` alone: `groups` hashes of fixed inputs already on the
    /// device, `runs` times; no copies are timed, only the kernels (profiling events).
    pub fn kernel_rate(&self, arity: usize, groups: usize, runs: usize) -> Result<KernelRate, GpuError> {
        self.kernel_rate_shaped(arity, groups, runs, None)
    }

    /// [`Gpu::kernel_rate`] in work-groups of `local` work-items (None: the driver's choice).
    pub fn kernel_rate_shaped(
        &self,
        arity: usize,
        groups: usize,
        runs: usize,
        local: Option<usize>,
    ) -> Result<KernelRate, GpuError> {
        let p = self.poseidon(arity)?;
        let input: Vec<u8> = (0..groups * arity).flat_map(|i| Fr::from(i as u64 + 7).square().to_repr()).collect();
        let mut inb = self.buffer(input.len())?;
        self.write(&mut inb, &input)?;
        let out = self.buffer(groups * NODE)?;
        self.hash_level_shaped(&p, &inb, &out, groups, local)?; // warm-up
        let mut kernel_seconds = 0.0;
        for _ in 0..runs {
            kernel_seconds += self.hash_level_shaped(&p, &inb, &out, groups, local)?;
        }
        let hashes = (groups * runs) as u64;
        Ok(KernelRate {
            kernels: self.kernels,
            max_registers: self.max_registers,
            local_size: local,
            arity,
            hashes,
            kernel_seconds,
            hashes_per_s: if kernel_seconds > 0.0 { hashes as f64 / kernel_seconds } else { 0.0 },
            multiplications_per_hash: multiplications(arity, self.kernels),
        })
    }

    /// Arity-8 levels above `level0` (already on the device, `per_sector` nodes per sector,
    /// sectors back to back), while each sector's count is a multiple of 8. Returns the levels
    /// read back, level 0 first.
    fn tree_levels(
        &self,
        level0: Buffer<u8>,
        per_sector: usize,
        sectors: usize,
        time: &mut DeviceTime,
    ) -> Result<Vec<Vec<u8>>, GpuError> {
        let p8 = self.poseidon(8)?;
        let mut bufs = vec![(level0, per_sector)];
        loop {
            let (buf, len) = bufs.last().unwrap();
            if *len % 8 != 0 || *len < 8 {
                break;
            }
            let next = len / 8;
            let out = self.buffer(next * sectors * NODE)?;
            time.kernels += self.hash_level(&p8, buf, &out, next * sectors)?;
            bufs.push((out, next));
        }
        let mut levels = Vec::with_capacity(bufs.len());
        for (buf, len) in &bufs {
            let (bytes, ev) = self.read(buf, len * sectors * NODE)?;
            time.transfers += seconds(&ev);
            levels.push(bytes);
        }
        Ok(levels)
    }

    /// One range of PC2 for all sectors on a slot of its own, waited for: every level the
    /// device computes comes back (tree-r-last's from level 1; the replica with data). PC2 keeps
    /// slots for the whole run instead ([`Gpu::slots`], [`Gpu::submit`]).
    pub fn pc2_range(&self, r: &RangeInput) -> Result<RangeOutput, GpuError> {
        let shape = RangeShape {
            layers: r.layers.len(),
            row: r.row,
            count: r.count,
            sectors: r.sectors,
            with_data: r.data.is_some(),
            tree_r_from: 1,
        };
        let mut slot = self.slots(shape, 1)?.pop().expect("one slot");
        // SAFETY: `r` outlives the slot, which is collected (or drained) before it is dropped.
        unsafe { self.submit(&mut slot, r)? };
        self.collect(&mut slot)
    }

    /// Arity-8 levels over `leaves` (`[sector][node]`, `per_sector` nodes each), level 0 the
    /// leaves, while every sector's count is a multiple of 8 (SnapDeals' tree-r-last).
    pub fn tree8(&self, leaves: &[u8], sectors: usize) -> Result<(Vec<Vec<u8>>, DeviceTime), GpuError> {
        assert_eq!(leaves.len() % (sectors * NODE), 0);
        let mut time = DeviceTime::default();
        let mut b = self.buffer(leaves.len())?;
        time.transfers += seconds(&self.write(&mut b, leaves)?);
        let levels = self.tree_levels(b, leaves.len() / sectors / NODE, sectors, &mut time)?;
        Ok((levels, time))
    }
}

/// How fast one arity's kernel hashed ([`Gpu::kernel_rate`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct KernelRate {
    /// The kernel variant measured.
    pub kernels: Kernels,
    /// The register cap it was built with (None: the compiler's choice).
    pub max_registers: Option<u32>,
    /// Work-items per work-group (None: the driver's choice).
    pub local_size: Option<usize>,
    /// 2, 8 or 11.
    pub arity: usize,
    /// Hashes timed.
    pub hashes: u64,
    /// Seconds the device spent in those kernels.
    pub kernel_seconds: f64,
    /// `hashes / kernel_seconds`.
    pub hashes_per_s: f64,
    /// Field multiplications in one hash with the device's kernels ([`multiplications`]).
    pub multiplications_per_hash: Multiplications,
}

/// Field multiplications in one Poseidon hash: wide products of two elements, and Montgomery
/// reductions of a product or of a sum of products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Multiplications {
    /// 256 × 256-bit products (squarings included).
    pub products: u64,
    /// Montgomery reductions.
    pub reductions: u64,
}

impl Multiplications {
    /// 32-bit multiply-adds they take with 8 limbs of 32 bits: a product is 8² low and 8² high
    /// halves, a reduction the same for its 8 quotient digits times p, plus the 8 digits.
    pub fn madds(&self) -> u64 {
        self.products * 2 * 64 + self.reductions * (2 * 64 + 8)
    }
}

/// Field multiplications in one Poseidon hash of `arity` as `kernels` compute it. Each full
/// round has `width` S-boxes of 3 multiplications and a dense `width × width` matrix, each
/// partial round one S-box and a sparse matrix (a row of `width`, then `width − 1` single
/// products), and the preimage and the digest are converted into and out of Montgomery form
/// (`arity + 1`). The baseline reduces every product; `mont.cl` reduces each matrix row once,
/// and computes only the digest's row of the last matrix.
pub fn multiplications(arity: usize, kernels: Kernels) -> Multiplications {
    fn counts<A: neptune::poseidon::Arity<Fr>>() -> (u64, u64) {
        let c = PoseidonConstants::<Fr, A>::new();
        (2 * c.half_full_rounds as u64, c.partial_rounds as u64)
    }
    let (full, partial) = match arity {
        2 => counts::<U2>(),
        8 => counts::<U8>(),
        11 => counts::<U11>(),
        n => panic!("no Poseidon constants for arity {n}"),
    };
    let w = arity as u64 + 1;
    let convert = arity as u64 + 1;
    match kernels {
        Kernels::Baseline => {
            let n = full * (3 * w + w * w) + partial * (3 + 2 * w - 1) + convert;
            Multiplications { products: n, reductions: n }
        }
        Kernels::Default | Kernels::Portable => Multiplications {
            products: full * 3 * w + (full - 1) * w * w + w + partial * (3 + 2 * w - 1) + convert,
            reductions: full * 3 * w + (full - 1) * w + 1 + partial * (3 + 1 + w - 1) + convert,
        },
    }
}

/// Chunks a range's layers are copied in: enough for the copies to overlap the kernels, few
/// enough that each copy stays large.
const COPY_CHUNKS: usize = 4;

/// `count` rows in at most `n` chunks of nearly equal size, as (first row, rows).
fn chunks(count: usize, n: usize) -> impl Iterator<Item = (usize, usize)> {
    let size = count.div_ceil(n.max(1)).max(1);
    (0..count).step_by(size).map(move |i0| (i0, size.min(count - i0)))
}

/// Hashes each program's self-check computes: enough to fill more than one work-group.
pub const SELF_CHECK_GROUPS: u64 = 300;

/// neptune's hash of each group of `arity` (2, 8 or 11) elements of `xs`, with its
/// Merkle-tree constants.
fn neptune_hashes(arity: usize, xs: &[Fr]) -> Vec<Fr> {
    use std::sync::OnceLock;
    fn each<A: neptune::poseidon::Arity<Fr>>(c: &PoseidonConstants<Fr, A>, xs: &[Fr]) -> Vec<Fr> {
        xs.chunks(A::to_usize()).map(|g| neptune::poseidon::Poseidon::new_with_preimage(g, c).hash()).collect()
    }
    // Made once: the per-range check hashes a few hundred nodes a range.
    static C2: OnceLock<PoseidonConstants<Fr, U2>> = OnceLock::new();
    static C8: OnceLock<PoseidonConstants<Fr, U8>> = OnceLock::new();
    static C11: OnceLock<PoseidonConstants<Fr, U11>> = OnceLock::new();
    match arity {
        2 => each(C2.get_or_init(PoseidonConstants::new), xs),
        8 => each(C8.get_or_init(PoseidonConstants::new), xs),
        11 => each(C11.get_or_init(PoseidonConstants::new), xs),
        n => panic!("no Poseidon constants for arity {n}"),
    }
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Device time of a finished command, from its profiling counters (0 when not available).
/// An event's `[start, end)` on the device's clock, in nanoseconds (None without profiling).
fn interval(ev: &Event) -> Option<(u64, u64)> {
    match (ev.profiling_command_start(), ev.profiling_command_end()) {
        (Ok(a), Ok(b)) if b >= a => Some((a, b)),
        _ => None,
    }
}

fn seconds(ev: &Event) -> f64 {
    match (ev.profiling_command_start(), ev.profiling_command_end()) {
        (Ok(a), Ok(b)) if b >= a => (b - a) as f64 * 1e-9,
        _ => 0.0,
    }
}

/// The OpenCL C source for one arity: ec-gpu-gen's field code for BLS12-381's scalar field,
/// then the Poseidon kernels with the arity's round counts.
fn source(flat: &constants::Flat) -> String {
    let name = <Fr as ec_gpu::GpuName>::name();
    let shape = format!(
        "#define ARITY {}\n#define WIDTH {}\n#define HALF {}\n#define PARTIAL {}\n",
        flat.arity,
        flat.arity + 1,
        flat.half,
        flat.partial
    );
    ec_gpu_gen::SourceBuilder::new()
        .add_field::<Fr>()
        .append_source((shape + include_str!("mont.cl") + include_str!("poseidon.cl")).replace("FIELD", &name))
        .build_32_bit_limbs()
}

#[cfg(test)]
mod tests {
    use super::{chunks, overlap_ns};

    #[test]
    fn overlap_counts_the_time_both_sets_cover() {
        // Serial: kernels after copies.
        assert_eq!(overlap_ns(&[(10, 20)], &[(0, 10)]), 0);
        // A copy under a kernel, and a copy half under the next one.
        assert_eq!(overlap_ns(&[(0, 10), (20, 30)], &[(2, 5), (25, 40)]), 3 + 5);
        // Overlaps within a set are counted once, in any order.
        assert_eq!(overlap_ns(&[(5, 15), (0, 10)], &[(0, 100), (8, 9)]), 15);
        // Empty and backwards intervals count nothing.
        assert_eq!(overlap_ns(&[], &[(0, 10)]), 0);
        assert_eq!(overlap_ns(&[(10, 5)], &[(0, 10)]), 0);
    }

    #[test]
    fn a_range_is_copied_in_chunks_that_cover_every_row_once() {
        for (count, n) in [(64usize, 4usize), (10, 4), (3, 4), (1, 4), (8, 1), (1 << 21, 4)] {
            let c: Vec<(usize, usize)> = chunks(count, n).collect();
            assert!(c.len() <= n && !c.is_empty(), "{count} rows in {n}: {c:?}");
            let mut next = 0;
            for (i0, cc) in c {
                assert_eq!(i0, next, "{count} rows in {n}: contiguous");
                assert!(cc > 0);
                next = i0 + cc;
            }
            assert_eq!(next, count, "{count} rows in {n}: all of them");
        }
    }
}
