//! Layer storage for the sealer.
//!
//! Layers are stored as 4 KiB pages. [`Stripe`] maps (layer, page) to (device, byte offset):
//! page `p` of a layer goes to device `p mod D` at block `slot_offset + layer·B + p div D`,
//! with `B = ceil(pages_per_layer / D)` blocks per layer per device.
//!
//! I/O goes through the [`PageBackend`] trait: batches of page reads/writes that complete
//! before the call returns (callers get overlap by running several backends on different
//! threads, each with its own queue). The shipped backend, [`UringBackend`], uses io_uring
//! with `O_DIRECT` on block devices or regular files, registered (fixed) files, and registered
//! (fixed) buffers when the memlock limit allows. A user-space NVMe backend (SPDK over vfio) fits the same trait —
//! one queue pair per backend instance — but is **not** shipped: it cannot be built or tested
//! here.

#![warn(missing_docs)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod aligned;
pub mod durable;
mod extent;
pub use aligned::{AlignedBuf, HugeArena, HUGEPAGE};
pub use extent::{plan, plan_range, Extent, DEFAULT_REQUEST_BYTES, MAX_SEGMENTS, MIN_REQUEST_BYTES};

/// The I/O unit: one 4 KiB page.
pub const PAGE: usize = 4096;

/// One page-granular transfer: `len` bytes (a multiple of [`PAGE`]) between device `dev` at
/// byte `offset` and memory at `buf` (4 KiB aligned).
#[derive(Clone, Copy, Debug)]
pub struct PageIo {
    /// Device index in [`Devices`].
    pub dev: usize,
    /// Byte offset on the device (multiple of 4096).
    pub offset: u64,
    /// Memory address (4 KiB aligned).
    pub buf: *mut u8,
    /// Length in bytes (multiple of 4096).
    pub len: usize,
}
// SAFETY: PageIo is plain data and never dereferences `buf` itself; that the memory is valid for the
// transfer is a contract on whoever builds it and hands it to a backend, on whatever thread.
unsafe impl Send for PageIo {}

/// A storage backend: executes batches of page transfers.
///
/// Implementations own one submission queue; they are used from one thread at a time.
pub trait PageBackend: Send {
    /// Short name for logs ("io_uring", …).
    fn name(&self) -> &'static str;
    /// Read every transfer in `ios`; returns when all are complete.
    fn read(&mut self, ios: &[PageIo]) -> io::Result<()>;
    /// Write every transfer in `ios`; returns when all are complete.
    fn write(&mut self, ios: &[PageIo]) -> io::Result<()>;
    /// Read every request in `ext` (large, possibly vectored: [`plan`]); returns when all
    /// are complete. The default runs them as page transfers.
    fn read_extents(&mut self, ext: &[Extent]) -> io::Result<()> {
        let ios: Vec<PageIo> = ext.iter().flat_map(|e| e.pages()).collect();
        self.read(&ios)
    }
    /// Write every request in `ext`; returns when all are complete.
    fn write_extents(&mut self, ext: &[Extent]) -> io::Result<()> {
        let ios: Vec<PageIo> = ext.iter().flat_map(|e| e.pages()).collect();
        self.write(&ios)
    }
    /// Make completed writes durable (fdatasync / flush).
    fn flush(&mut self) -> io::Result<()>;
    /// Offer long-lived buffers for zero-copy registration. Returns true when the backend
    /// registered them. Optional; the default does nothing.
    ///
    /// # Safety
    /// Each region `(ptr, len)` must be valid for reads and writes of `len` bytes and stay allocated
    /// and unmoved for the backend's whole lifetime (until it is dropped).
    unsafe fn register_buffers(&mut self, _regions: &[(*mut u8, usize)]) -> bool {
        false
    }
}

/// Page placement of a batch's layers over its devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stripe {
    /// Number of devices.
    pub devices: u64,
    /// Slot start on every device, in 4 KiB blocks.
    pub slot_offset: u64,
    /// Pages per layer (all sectors of the batch).
    pub pages_per_layer: u64,
    /// Blocks per layer on each device: `ceil(pages_per_layer / devices)`.
    pub blocks_per_layer: u64,
}

impl Stripe {
    /// Placement for `pages_per_layer` pages over `devices` devices starting at `slot_offset`.
    pub fn new(devices: usize, slot_offset: u64, pages_per_layer: u64) -> Self {
        let d = devices as u64;
        Stripe { devices: d, slot_offset, pages_per_layer, blocks_per_layer: pages_per_layer.div_ceil(d) }
    }

    /// (device, byte offset) of `page` of layer `layer` (1-based).
    #[inline]
    pub fn locate(&self, layer: u32, page: u64) -> (usize, u64) {
        let dev = (page % self.devices) as usize;
        let block = self.slot_offset + (layer as u64 - 1) * self.blocks_per_layer + page / self.devices;
        (dev, block * PAGE as u64)
    }

    /// Bytes each device needs for `layers` layers (including the slot offset).
    pub fn bytes_per_device(&self, layers: usize) -> u64 {
        (self.slot_offset + layers as u64 * self.blocks_per_layer) * PAGE as u64
    }
}

/// The opened layer devices/files, shared by all backends of a batch.
pub struct Devices {
    files: Vec<File>,
    paths: Vec<PathBuf>,
}

/// The size in bytes of the block device open as `f` (`BLKGETSIZE64`): what a regular file's
/// length is for a file.
pub fn block_device_size(f: &File) -> io::Result<u64> {
    // BLKGETSIZE64 = _IOR(0x12, 114, size_t)
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    let mut size: u64 = 0;
    // SAFETY: the fd is open for the lifetime of `f`; BLKGETSIZE64 writes one u64 (size_t on 64-bit
    // Linux) through the pointer, which points to the local `size`.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size)
}

impl Devices {
    /// Open every path with `O_DIRECT`. Regular files are created or extended to `bytes`
    /// (preallocated with fallocate when the filesystem supports it); block devices must
    /// already be at least that large.
    pub fn open(paths: &[PathBuf], bytes: u64) -> io::Result<Arc<Devices>> {
        let mut files = Vec::new();
        for p in paths {
            files.push(Self::open_one(p, bytes)?);
            durable::track(p);
        }
        Ok(Arc::new(Devices { files, paths: paths.to_vec() }))
    }

    /// Open existing devices/files without resizing (for reads of a finished batch); each must
    /// hold at least `bytes` (the slot's end), or it was truncated or replaced since the layers
    /// were written and its missing tail would read as nothing.
    pub fn open_existing(paths: &[PathBuf], bytes: u64) -> io::Result<Arc<Devices>> {
        let mut files = Vec::new();
        for p in paths {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(p)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
            let meta = f.metadata().map_err(|e| io::Error::new(e.kind(), format!("{}: stat: {e}", p.display())))?;
            let size = if meta.file_type().is_block_device() {
                block_device_size(&f)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: device size: {e}", p.display())))?
            } else {
                meta.len()
            };
            if size < bytes {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{} has {size} bytes but the batch's layer slot ends at byte {bytes}: it was truncated or replaced after PC1 wrote it; run PC1 again on a whole device",
                        p.display()
                    ),
                ));
            }
            files.push(f);
        }
        Ok(Arc::new(Devices { files, paths: paths.to_vec() }))
    }

    fn open_one(p: &Path, bytes: u64) -> io::Result<File> {
        let ctx = |e: io::Error, what: &str| io::Error::new(e.kind(), format!("{}: {what}: {e}", p.display()));
        let is_block = std::fs::metadata(p).map(|m| m.file_type().is_block_device()).unwrap_or(false);
        let mut oo = OpenOptions::new();
        oo.read(true).write(true).custom_flags(libc::O_DIRECT);
        if !is_block {
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| ctx(e, "creating parent directory"))?;
            }
            oo.create(true);
        }
        let f = oo.open(p).map_err(|e| ctx(e, "opening with O_DIRECT"))?;
        if is_block {
            let size = block_device_size(&f).map_err(|e| ctx(e, "reading block device size"))?;
            if size < bytes {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: block device has {size} bytes, the batch needs {bytes}", p.display()),
                ));
            }
        } else {
            let cur = f.metadata().map_err(|e| ctx(e, "stat"))?.len();
            if cur < bytes {
                // Preallocate when possible; fall back to a sparse extension.
                // SAFETY: plain syscall on an fd that is open for the lifetime of `f`; no memory is passed.
                let r = unsafe { libc::fallocate(f.as_raw_fd(), 0, cur as i64, (bytes - cur) as i64) };
                if r != 0 {
                    f.set_len(bytes).map_err(|e| ctx(e, "extending file"))?;
                }
            }
        }
        Ok(f)
    }

    /// Number of devices.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when there are no devices.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Paths in stripe order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    fn fd(&self, i: usize) -> i32 {
        self.files[i].as_raw_fd()
    }
}

/// Where a request goes: the ring's registered file table, or a plain descriptor.
#[derive(Clone, Copy)]
enum Target {
    Fixed(u32),
    Fd(i32),
}

/// A batch of requests a ring runs: page transfers or (vectored) extents.
trait Requests {
    fn count(&self) -> usize;
    /// The submission entry of request `i`; `registered` are the fixed buffers.
    fn entry(
        &self,
        i: usize,
        target: &dyn Fn(usize) -> Target,
        registered: &[(usize, usize)],
        write: bool,
    ) -> io_uring::squeue::Entry;
    fn len(&self, i: usize) -> usize;
    /// (device, byte offset) of request `i`.
    fn place(&self, i: usize) -> (usize, u64);
    /// What is left of request `i` after its first `done` bytes, as page transfers.
    fn rest(&self, i: usize, done: usize) -> Vec<PageIo>;
}

fn fixed_index(registered: &[(usize, usize)], buf: *mut u8, len: usize) -> Option<u16> {
    let a = buf as usize;
    registered.iter().position(|&(s, l)| a >= s && a + len <= s + l).map(|i| i as u16)
}

/// One contiguous transfer's entry: from a registered buffer when `buf` lies in one.
fn single_entry(
    t: Target,
    buf: *mut u8,
    len: usize,
    offset: u64,
    registered: &[(usize, usize)],
    write: bool,
) -> io_uring::squeue::Entry {
    use io_uring::{opcode, types};
    let fixed = fixed_index(registered, buf, len);
    macro_rules! entry {
        ($fd:expr) => {
            match (write, fixed) {
                (false, Some(ix)) => opcode::ReadFixed::new($fd, buf, len as u32, ix).offset(offset).build(),
                (false, None) => opcode::Read::new($fd, buf, len as u32).offset(offset).build(),
                (true, Some(ix)) => {
                    opcode::WriteFixed::new($fd, buf as *const u8, len as u32, ix).offset(offset).build()
                }
                (true, None) => opcode::Write::new($fd, buf as *const u8, len as u32).offset(offset).build(),
            }
        };
    }
    match t {
        Target::Fixed(i) => entry!(types::Fixed(i)),
        Target::Fd(fd) => entry!(types::Fd(fd)),
    }
}

impl Requests for &[PageIo] {
    fn count(&self) -> usize {
        <[PageIo]>::len(self)
    }
    fn entry(
        &self,
        i: usize,
        target: &dyn Fn(usize) -> Target,
        registered: &[(usize, usize)],
        write: bool,
    ) -> io_uring::squeue::Entry {
        let io = &self[i];
        single_entry(target(io.dev), io.buf, io.len, io.offset, registered, write)
    }
    fn len(&self, i: usize) -> usize {
        self[i].len
    }
    fn place(&self, i: usize) -> (usize, u64) {
        (self[i].dev, self[i].offset)
    }
    fn rest(&self, i: usize, done: usize) -> Vec<PageIo> {
        let io = self[i];
        // SAFETY: 0 <= done < io.len, and io.buf is valid for io.len bytes (PageIo's contract),
        // so buf + done stays inside that memory.
        vec![PageIo {
            dev: io.dev,
            offset: io.offset + done as u64,
            buf: unsafe { io.buf.add(done) },
            len: io.len - done,
        }]
    }
}

impl Requests for &[Extent] {
    fn count(&self) -> usize {
        <[Extent]>::len(self)
    }
    fn entry(
        &self,
        i: usize,
        target: &dyn Fn(usize) -> Target,
        registered: &[(usize, usize)],
        write: bool,
    ) -> io_uring::squeue::Entry {
        use io_uring::{opcode, types};
        let e = &self[i];
        if let [s] = e.segs.as_slice() {
            return single_entry(target(e.dev), s.iov_base as *mut u8, s.iov_len, e.offset, registered, write);
        }
        let (iov, n) = (e.segs.as_ptr(), e.segs.len() as u32);
        macro_rules! entry {
            ($fd:expr) => {
                if write {
                    opcode::Writev::new($fd, iov, n).offset(e.offset).build()
                } else {
                    opcode::Readv::new($fd, iov, n).offset(e.offset).build()
                }
            };
        }
        match target(e.dev) {
            Target::Fixed(f) => entry!(types::Fixed(f)),
            Target::Fd(fd) => entry!(types::Fd(fd)),
        }
    }
    fn len(&self, i: usize) -> usize {
        self[i].len()
    }
    fn place(&self, i: usize) -> (usize, u64) {
        (self[i].dev, self[i].offset)
    }
    fn rest(&self, i: usize, mut done: usize) -> Vec<PageIo> {
        let mut out = Vec::new();
        for io in self[i].pages() {
            if done >= io.len {
                done -= io.len;
                continue;
            }
            // SAFETY: done < io.len and the segment is valid for io.len bytes (Extent's contract).
            out.push(PageIo {
                offset: io.offset + done as u64,
                buf: unsafe { io.buf.add(done) },
                len: io.len - done,
                ..io
            });
            done = 0;
        }
        out
    }
}

/// io_uring backend with `O_DIRECT`.
pub struct UringBackend {
    ring: io_uring::IoUring,
    devs: Arc<Devices>,
    depth: usize,
    registered: Vec<(usize, usize)>,
    /// The devices' descriptors are registered with the ring (fixed files: no per-request
    /// descriptor lookup).
    fixed_files: bool,
    /// Why io_uring refused the last buffers offered to [`PageBackend::register_buffers`].
    register_error: Option<io::Error>,
}

impl UringBackend {
    /// A backend over `devs` with a queue of `depth` entries.
    pub fn new(devs: Arc<Devices>, depth: u32) -> io::Result<Self> {
        let ring = io_uring::IoUring::new(depth.next_power_of_two())?;
        let fds: Vec<i32> = (0..devs.files.len()).map(|i| devs.fd(i)).collect();
        // Fixed files index the ring's table by device number; plain descriptors when refused.
        let fixed_files = ring.submitter().register_files(&fds).is_ok();
        Ok(UringBackend {
            ring,
            devs,
            depth: depth as usize,
            registered: Vec::new(),
            fixed_files,
            register_error: None,
        })
    }

    fn run(&mut self, reqs: &dyn Requests, write: bool) -> io::Result<()> {
        let UringBackend { ring, devs, depth, registered, fixed_files, .. } = self;
        let target = |dev: usize| if *fixed_files { Target::Fixed(dev as u32) } else { Target::Fd(devs.fd(dev)) };
        let count = reqs.count();
        let mut next = 0usize;
        // Dropped on every way out of this function, `?` included: it waits for what is in flight.
        let mut flight = InFlight { ring, n: 0 };
        let mut failure: Option<io::Error> = None;
        while (next < count && failure.is_none()) || flight.n > 0 {
            if failure.is_none() {
                let mut sq = flight.ring.submission();
                while next < count && flight.n < *depth {
                    let e = reqs.entry(next, &target, registered, write).user_data(next as u64);
                    // SAFETY: the fd belongs to `devs`, kept open by the Arc in self; the memory of
                    // request `next` is valid for its length by PageIo's / Extent's contract (not
                    // checkable here), and `reqs` (with any iovec array an entry points to) is
                    // borrowed for the whole call, which `flight` outlives only by waiting for
                    // every submitted entry.
                    if unsafe { sq.push(&e) }.is_err() {
                        break;
                    }
                    next += 1;
                    flight.n += 1;
                }
            }
            flight.wait_one()?;
            let mut short: Vec<(usize, usize)> = Vec::new();
            for cqe in flight.ring.completion() {
                flight.n -= 1;
                let i = cqe.user_data() as usize;
                let r = cqe.result();
                if r == -libc::EINTR || r == -libc::EAGAIN {
                    // Interrupted before any byte moved: the whole request again, synchronously.
                    short.push((i, 0));
                } else if r < 0 {
                    let e = io::Error::from_raw_os_error(-r);
                    let (dev, offset) = reqs.place(i);
                    failure.get_or_insert(io::Error::new(
                        e.kind(),
                        format!(
                            "{} {} at offset {offset}: {e}",
                            if write { "write to" } else { "read from" },
                            devs.paths[dev].display(),
                        ),
                    ));
                } else if (r as usize) < reqs.len(i) {
                    short.push((i, r as usize));
                }
            }
            // Finish a short transfer synchronously (rare: signals, the end of a file).
            for (i, done) in short {
                if failure.is_some() {
                    break;
                }
                for rest in reqs.rest(i, done) {
                    if let Err(e) = sync_io(devs, &rest, write) {
                        failure = Some(e);
                        break;
                    }
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }
}

/// Whether a failed `io_uring_enter` is only to be tried again: a signal (a debugger, SIGSTOP
/// and SIGCONT, the cgroup freezer), or a full completion queue the next wait drains.
fn retry_enter(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY))
}

/// Requests submitted to a ring and not yet completed. Dropping it waits for every one (on an
/// error as on success), so the memory a request points at is never freed, or handed back to
/// the caller, while the kernel may still read or write it.
struct InFlight<'r> {
    ring: &'r mut io_uring::IoUring,
    n: usize,
}

impl InFlight<'_> {
    /// Submit what is queued and wait for at least one completion, through signals.
    fn wait_one(&mut self) -> io::Result<()> {
        loop {
            match self.ring.submit_and_wait(1) {
                Err(e) if retry_enter(&e) => {
                    // EBUSY: completions are waiting; the caller reaps them.
                    if !self.ring.completion().is_empty() {
                        return Ok(());
                    }
                }
                r => return r.map(|_| ()),
            }
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        while self.n > 0 {
            if let Err(e) = self.wait_one() {
                // A ring that can no longer wait leaves the kernel writing into memory about to be
                // freed: stopping here is the only safe way out.
                eprintln!("io_uring: cannot wait for {} requests in flight: {e}; aborting", self.n);
                std::process::abort();
            }
            self.n -= self.ring.completion().count();
        }
    }
}

/// One transfer with `pread`/`pwrite`, through signals; the end of the file inside it is an
/// error (a layer file shorter than its slot must not read as zeros).
fn sync_io(devs: &Devices, io: &PageIo, write: bool) -> io::Result<()> {
    let fd = devs.fd(io.dev);
    let mut done = 0usize;
    while done < io.len {
        // SAFETY: fd stays open (devs); done < io.len, so buf + done and the io.len - done bytes
        // after it lie inside the io.len bytes that PageIo's contract says are valid (and not
        // otherwise in use) for this transfer.
        let r = unsafe {
            if write {
                libc::pwrite(
                    fd,
                    io.buf.add(done) as *const libc::c_void,
                    io.len - done,
                    (io.offset + done as u64) as i64,
                )
            } else {
                libc::pread(fd, io.buf.add(done) as *mut libc::c_void, io.len - done, (io.offset + done as u64) as i64)
            }
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN)) {
                continue;
            }
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "{} {} at offset {}: {e}",
                    if write { "write to" } else { "read from" },
                    devs.paths[io.dev].display(),
                    io.offset + done as u64
                ),
            ));
        }
        if r == 0 {
            let (kind, what) = if write {
                (io::ErrorKind::WriteZero, "accepted no bytes")
            } else {
                (io::ErrorKind::UnexpectedEof, "ends before the layer slot does (the file was truncated or replaced)")
            };
            return Err(io::Error::new(
                kind,
                format!(
                    "{} {what}: offset {} of a {}-byte transfer at {}",
                    devs.paths[io.dev].display(),
                    io.offset + done as u64,
                    io.len,
                    io.offset
                ),
            ));
        }
        done += r as usize;
    }
    Ok(())
}

impl PageBackend for UringBackend {
    fn name(&self) -> &'static str {
        match (self.registered.is_empty(), self.fixed_files) {
            (true, false) => "io_uring",
            (true, true) => "io_uring+fixed-files",
            (false, false) => "io_uring+fixed",
            (false, true) => "io_uring+fixed+fixed-files",
        }
    }
    fn read(&mut self, ios: &[PageIo]) -> io::Result<()> {
        self.run(&ios, false)
    }
    fn write(&mut self, ios: &[PageIo]) -> io::Result<()> {
        self.run(&ios, true)
    }
    fn read_extents(&mut self, ext: &[Extent]) -> io::Result<()> {
        self.run(&ext, false)
    }
    fn write_extents(&mut self, ext: &[Extent]) -> io::Result<()> {
        self.run(&ext, true)
    }
    fn flush(&mut self) -> io::Result<()> {
        for (f, p) in self.devs.files.iter().zip(&self.devs.paths) {
            // SAFETY: plain syscall on an fd that is open for the lifetime of `f` (owned by self.devs).
            let r = unsafe { libc::fdatasync(f.as_raw_fd()) };
            if r != 0 {
                let e = io::Error::last_os_error();
                // block devices and tmpfs may reject fdatasync with EINVAL; nothing to flush then
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(e);
                }
            }
            durable::synced(p);
        }
        Ok(())
    }
    /// Registers `regions` as io_uring fixed buffers.
    ///
    /// # Safety
    /// Same as [`PageBackend::register_buffers`]: each region must be valid for reads and writes of
    /// its length and stay allocated and unmoved until this backend (and so its ring) is dropped.
    unsafe fn register_buffers(&mut self, regions: &[(*mut u8, usize)]) -> bool {
        let iov: Vec<libc::iovec> =
            regions.iter().map(|&(p, l)| libc::iovec { iov_base: p as *mut libc::c_void, iov_len: l }).collect();
        // SAFETY: io_uring needs the regions valid until they are unregistered or the ring is destroyed;
        // the ring is dropped with self, and this fn's contract keeps them valid that long.
        match self.ring.submitter().register_buffers(&iov) {
            Ok(()) => {
                self.registered = regions.iter().map(|&(p, l)| (p as usize, l)).collect();
                self.register_error = None;
                true
            }
            // Plain reads and writes still work; the caller says why (register_error).
            Err(e) => {
                self.register_error = Some(e);
                false
            }
        }
    }
}

impl UringBackend {
    /// Why io_uring refused the last buffers offered to it (None: they were taken, or none
    /// were offered): ENOMEM when RLIMIT_MEMLOCK is smaller than them, EINVAL for a region the
    /// kernel does not take (too large, or more regions than it allows), or another errno.
    pub fn register_error(&self) -> Option<&io::Error> {
        self.register_error.as_ref()
    }
}

/// Merge transfers that are adjacent both on the device and in memory (fewer, larger I/Os).
pub fn coalesce(ios: &mut Vec<PageIo>, max_len: usize) {
    if ios.len() < 2 {
        return;
    }
    let mut out: Vec<PageIo> = Vec::with_capacity(ios.len());
    for io in ios.drain(..) {
        if let Some(last) = out.last_mut() {
            // SAFETY: last.buf is valid for last.len bytes (PageIo's contract), so buf + len is at most
            // one past the end of that memory. Not checkable here: coalesce is safe and PageIo's
            // fields are public, so a PageIo built with a dangling `buf` makes this `add` UB.
            if last.dev == io.dev
                && last.offset + last.len as u64 == io.offset
                && unsafe { last.buf.add(last.len) } == io.buf
                && last.len + io.len <= max_len
            {
                last.len += io.len;
                continue;
            }
        }
        out.push(io);
    }
    *ios = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripe_math() {
        let s = Stripe::new(3, 10, 7);
        assert_eq!(s.blocks_per_layer, 3);
        assert_eq!(s.locate(1, 0), (0, 10 * 4096));
        assert_eq!(s.locate(1, 4), (1, 11 * 4096));
        assert_eq!(s.locate(2, 6), (0, (10 + 3 + 2) * 4096));
        assert_eq!(s.bytes_per_device(2), (10 + 6) * 4096);
    }

    #[test]
    fn uring_roundtrip_on_files() {
        let dir = std::env::temp_dir().join(format!("sealer-storage-test-{}", std::process::id()));
        let paths = vec![dir.join("a.img"), dir.join("b.img")];
        let stripe = Stripe::new(2, 1, 8);
        let devs = Devices::open(&paths, stripe.bytes_per_device(2)).unwrap();
        let mut be = UringBackend::new(devs, 8).unwrap();
        let mut src = AlignedBuf::new(8 * PAGE);
        for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
            *b = (i / PAGE) as u8 + 1;
        }
        let ios: Vec<PageIo> = (0..8)
            .map(|p| {
                let (dev, offset) = stripe.locate(2, p);
                // SAFETY: p < 8 and `src` holds 8 pages, so the offset stays inside its allocation.
                PageIo { dev, offset, buf: unsafe { src.as_mut_ptr().add(p as usize * PAGE) }, len: PAGE }
            })
            .collect();
        be.write(&ios).unwrap();
        be.flush().unwrap();
        let dst = AlignedBuf::new(8 * PAGE);
        let (ptr, len) = (dst.as_mut_ptr(), dst.len());
        // SAFETY: (ptr, len) is dst's allocation, which does not move. It is NOT kept alive for the
        // backend's lifetime as the contract asks: `dst` is declared after `be`, so it is dropped first.
        // No I/O is issued after the read below, so nothing touches the freed memory in practice.
        let _ = unsafe { be.register_buffers(&[(ptr, len)]) };
        // SAFETY: i < 8 (ios has 8 entries) and `dst` holds 8 pages, so ptr + (7 - i) pages is inside it.
        let rios: Vec<PageIo> = ios
            .iter()
            .rev()
            .enumerate()
            .map(|(i, io)| PageIo { buf: unsafe { ptr.add((7 - i) * PAGE) }, ..*io })
            .collect();
        be.read(&rios).unwrap();
        assert_eq!(src.as_slice(), dst.as_slice());
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Pages `0..pages` of layer 1 over `devs` (stripe `st`) into `buf`, in order.
    fn page_ios(st: &Stripe, buf: &AlignedBuf, pages: u64) -> Vec<PageIo> {
        (0..pages)
            .map(|p| {
                let (dev, offset) = st.locate(1, p);
                // SAFETY: p < pages and `buf` holds that many pages.
                PageIo { dev, offset, buf: unsafe { buf.as_mut_ptr().add(p as usize * PAGE) }, len: PAGE }
            })
            .collect()
    }

    #[test]
    fn a_layer_file_shorter_than_its_slot_is_an_error_never_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let paths = vec![dir.path().join("a.img"), dir.path().join("b.img")];
        let st = Stripe::new(2, 1, 16);
        let bytes = st.bytes_per_device(1);
        Devices::open(&paths, bytes).unwrap();
        // Cut b.img short by a page: opening it for the batch's reads is refused, naming it.
        std::fs::OpenOptions::new().write(true).open(&paths[1]).unwrap().set_len(bytes - PAGE as u64).unwrap();
        let e = Devices::open_existing(&paths, bytes).err().expect("a short file refused");
        assert!(e.to_string().contains("b.img") && e.to_string().contains("truncated"), "{e}");
        // Read anyway (opened for fewer bytes): the page past its end is an error, not zeros.
        let devs = Devices::open_existing(&paths, 0).unwrap();
        let mut be = UringBackend::new(devs, 8).unwrap();
        let buf = AlignedBuf::new(16 * PAGE);
        let e = be.read(&page_ios(&st, &buf, 16)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(e.to_string().contains("b.img"), "{e}");
    }

    extern "C" fn ignore_signal(_: libc::c_int) {}

    /// Reads under a storm of signals (what a debugger, SIGSTOP/SIGCONT or the cgroup freezer
    /// send) return every byte: an interrupted wait is waited again, never an error and never
    /// a return with requests in flight.
    #[test]
    fn reads_under_a_signal_storm_complete_with_the_right_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let paths = vec![dir.path().join("a.img")];
        let pages = 256u64;
        let st = Stripe::new(1, 0, pages);
        let devs = Devices::open(&paths, st.bytes_per_device(1)).unwrap();
        let mut be = UringBackend::new(devs, 4).unwrap();
        let mut src = AlignedBuf::new(pages as usize * PAGE);
        for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
            *b = (i / 4099) as u8;
        }
        be.write(&page_ios(&st, &src, pages)).unwrap();
        // SIGUSR2 with a handler that does nothing and no SA_RESTART: every blocking call it
        // lands in returns EINTR.
        // SAFETY: a plain handler that touches nothing; sigaction is given valid pointers.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore_signal as *const () as usize;
            sa.sa_flags = 0;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        }
        let me = unsafe { libc::pthread_self() };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let storm = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut sent = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // SAFETY: the test thread outlives the storm (joined below).
                    unsafe { libc::pthread_kill(me, libc::SIGUSR2) };
                    sent += 1;
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                sent
            })
        };
        let mut dst = AlignedBuf::new(pages as usize * PAGE);
        let started = std::time::Instant::now();
        let mut reads = 0;
        let mut result = Ok(());
        // No panic while the storm runs: it signals this thread until it is stopped.
        while started.elapsed() < std::time::Duration::from_secs(2) && result.is_ok() {
            dst.as_mut_slice().fill(0xaa);
            result = be.read(&page_ios(&st, &dst, pages)).and_then(|()| {
                (src.as_slice() == dst.as_slice()).then_some(()).ok_or_else(|| io::Error::other("other bytes"))
            });
            reads += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let sent = storm.join().unwrap();
        result.unwrap_or_else(|e| panic!("read {reads} failed under {sent} signals: {e}"));
        assert!(sent > 100, "only {sent} signals sent");
    }

    #[test]
    fn extents_write_and_read_what_pages_do_across_devices() {
        let dir = std::env::temp_dir().join(format!("sealer-storage-ext-{}", std::process::id()));
        for devices in 1..=3 {
            let paths: Vec<PathBuf> = (0..devices).map(|d| dir.join(format!("{devices}-{d}.img"))).collect();
            let stripe = Stripe::new(devices, 3, 40);
            let devs = Devices::open(&paths, stripe.bytes_per_device(2)).unwrap();
            let mut be = UringBackend::new(devs, 4).unwrap();
            let mut src = AlignedBuf::new(37 * PAGE);
            for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
                *b = (i * 7 / PAGE + i) as u8;
            }
            // Pages 2..39 of layer 2 in requests of 3 pages (vectored across the stripe).
            be.write_extents(&plan_range(&stripe, 2, 2, 37, src.as_mut_ptr(), 3 * PAGE)).unwrap();
            let whole = AlignedBuf::new(37 * PAGE);
            be.read_extents(&plan_range(&stripe, 2, 2, 37, whole.as_mut_ptr(), 1 << 20)).unwrap();
            assert_eq!(src.as_slice(), whole.as_slice(), "{devices} devices: one large read");
            let one = AlignedBuf::new(PAGE);
            for i in [0usize, 17, 36] {
                let (dev, offset) = stripe.locate(2, 2 + i as u64);
                be.read(&[PageIo { dev, offset, buf: one.as_mut_ptr(), len: PAGE }]).unwrap();
                assert_eq!(one.as_slice(), &src.as_slice()[i * PAGE..(i + 1) * PAGE], "{devices} devices: page {i}");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
