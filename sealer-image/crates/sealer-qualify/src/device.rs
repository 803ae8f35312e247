//! One layer device's figures: 1 MiB sequential writes only inside the write range, then 4 KiB
//! random reads and 1 MiB sequential reads, all through io_uring with `O_DIRECT` (buffered I/O
//! where the file system refuses `O_DIRECT`, and the result says so).
//!
//! With a write range the reads stay inside it, on the data just written: a layer file's holes
//! (a scrub punches them) and an SSD's deallocated blocks read without touching the media and
//! would flatter the device. Without one they go anywhere on it. A layer file shorter than the
//! write range is created or extended to its end (the sealer grows it the same way); nothing
//! is ever truncated, and the device is opened read-only when there is nothing to write.

use crate::{Options, WriteRange};
use io_uring::{opcode, types, IoUring};
use sealer_storage::AlignedBuf;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// The random-read unit, and the alignment of every offset and length.
pub const BLOCK: u64 = 4096;
/// The sequential transfer size.
pub const SEQ_BYTES: u64 = 1 << 20;
/// Requests in flight for the sequential reads and writes.
pub const SEQ_DEPTH: usize = 8;

/// One device's entry in the document.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceResult {
    /// The path as given.
    pub path: String,
    /// Its size: the block device's (`BLKGETSIZE64`) or the file's length; null when it could
    /// not be opened.
    pub bytes: Option<u64>,
    /// Whether the I/O bypassed the page cache (`O_DIRECT`); false where the file system
    /// refuses it (the figures then include the page cache); null when not opened.
    pub direct: Option<bool>,
    /// Requests in flight for the random reads.
    pub queue_depth: u32,
    /// 4 KiB reads per second at uniformly random aligned offsets over the write range (the
    /// whole device without one).
    pub random_read_iops: Option<f64>,
    /// Bytes per second of 1 MiB reads from the start of the write range (of the device
    /// without one) on, 8 in flight, wrapping at its end.
    pub seq_read_bytes_per_s: Option<f64>,
    /// Bytes per second of 1 MiB writes inside the write range (8 in flight, wrapping inside
    /// it), the closing fdatasync included; null when skipped or failed.
    pub seq_write_bytes_per_s: Option<f64>,
    /// Why the write was not measured (no write range), or null.
    pub write_skipped: Option<String>,
    /// What failed; the figures measured before it stay, the others are null.
    pub error: Option<String>,
}

/// Measure the device at `path` as `opts` says; a failure ends up in the entry's `error`.
pub fn measure(path: &Path, opts: &Options) -> DeviceResult {
    let mut r = DeviceResult {
        path: path.display().to_string(),
        bytes: None,
        direct: None,
        queue_depth: opts.depth,
        random_read_iops: None,
        seq_read_bytes_per_s: None,
        seq_write_bytes_per_s: None,
        write_skipped: opts.write_range.is_none().then(|| opts.no_write_reason.clone()),
        error: None,
    };
    if let Err(e) = measure_into(path, opts, &mut r) {
        log::warn!("{}: {e}", path.display());
        r.error = Some(e);
    }
    r
}

fn measure_into(path: &Path, opts: &Options, r: &mut DeviceResult) -> Result<(), String> {
    let dev = Device::open(path, opts.write_range.map(|w| w.end()))?;
    r.bytes = Some(dev.bytes);
    r.direct = Some(dev.direct);
    // What the reads cover: the range just written, or the whole device; of a layer file only
    // the extents that hold data (a hole reads as zeros without touching the disk).
    let span = match opts.write_range {
        Some(range) => {
            if range.end() > dev.bytes {
                return Err(format!(
                    "write range {}:{} ends at byte {}, beyond the device's {} bytes: nothing was written",
                    range.offset,
                    range.length,
                    range.end(),
                    dev.bytes
                ));
            }
            log::info!("{}: sequential 1 MiB writes in [{}, {})…", path.display(), range.offset, range.end());
            let w = dev.write_inside(range, opts.seconds)?;
            r.seq_write_bytes_per_s = Some(w.bytes as f64 / w.seconds);
            Extents::one(range.offset, range.length)
        }
        None if dev.is_file => Extents::of_data(&dev.file, dev.bytes)?,
        None => Extents::one(0, dev.bytes),
    };
    let blocks = span.blocks();
    if blocks == 0 {
        let what = if dev.is_file && opts.write_range.is_none() {
            "the file holds only holes (a scrubbed slot reads without touching the disk); qualify it through a free slot".to_string()
        } else {
            format!("{} bytes, less than one 4 KiB block", dev.bytes)
        };
        return Err(format!("nothing to read: {what}"));
    }
    log::info!("{}: {} bytes, direct I/O {}: random 4 KiB reads…", path.display(), dev.bytes, dev.direct);
    let mut rng = Rng::seeded();
    let random =
        dev.pump(opts.depth as usize, BLOCK, opts.seconds, false, |_| (span.block(rng.below(blocks)), BLOCK))?;
    r.random_read_iops = Some(random.requests as f64 / random.seconds);

    log::info!("{}: sequential 1 MiB reads…", path.display());
    let mut next = 0u64; // block index into the span
    let seq = dev.pump(SEQ_DEPTH, SEQ_BYTES, opts.seconds, false, |_| {
        let (off, len) = span.run(next, SEQ_BYTES / BLOCK);
        next = if next + len / BLOCK >= blocks { 0 } else { next + len / BLOCK };
        (off, len)
    })?;
    r.seq_read_bytes_per_s = Some(seq.bytes as f64 / seq.seconds);
    Ok(())
}

/// An opened device or file.
struct Device {
    file: File,
    bytes: u64,
    direct: bool,
    is_file: bool,
}

/// The 4 KiB-aligned byte ranges the reads cover, in order.
struct Extents {
    /// (offset, blocks) of each range, and the blocks before it.
    ranges: Vec<(u64, u64, u64)>,
}

impl Extents {
    /// Extents that hold at most this many ranges (a file's data extents beyond are not read).
    const MAX: usize = 4096;

    fn one(offset: u64, bytes: u64) -> Extents {
        Extents { ranges: vec![(offset, bytes / BLOCK, 0)] }
    }

    /// The data extents of a regular file (SEEK_DATA / SEEK_HOLE), trimmed to whole blocks.
    fn of_data(file: &File, len: u64) -> Result<Extents, String> {
        let fd = file.as_raw_fd();
        let mut ranges = Vec::new();
        let (mut pos, mut before) = (0u64, 0u64);
        while pos < len && ranges.len() < Self::MAX {
            // SAFETY: plain syscalls on the descriptor `file` holds open.
            let data = unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_DATA) };
            if data < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ENXIO) {
                    break; // no data after pos
                }
                return Err(format!("finding the file's data (SEEK_DATA): {e}"));
            }
            // SAFETY: as above.
            let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
            if hole < 0 {
                return Err(format!("finding the file's holes (SEEK_HOLE): {}", std::io::Error::last_os_error()));
            }
            let (start, end) = ((data as u64).div_ceil(BLOCK) * BLOCK, (hole as u64).min(len) / BLOCK * BLOCK);
            if end > start {
                ranges.push((start, (end - start) / BLOCK, before));
                before += (end - start) / BLOCK;
            }
            pos = (hole as u64).max(pos + 1);
        }
        Ok(Extents { ranges })
    }

    fn blocks(&self) -> u64 {
        self.ranges.last().map_or(0, |&(_, n, before)| before + n)
    }

    /// The byte offset of the i-th block.
    fn block(&self, i: u64) -> u64 {
        let k = self.ranges.partition_point(|&(_, _, before)| before <= i) - 1;
        let (offset, _, before) = self.ranges[k];
        offset + (i - before) * BLOCK
    }

    /// Up to `max` blocks from the i-th on, within its range: (offset, bytes).
    fn run(&self, i: u64, max: u64) -> (u64, u64) {
        let k = self.ranges.partition_point(|&(_, _, before)| before <= i) - 1;
        let (offset, n, before) = self.ranges[k];
        (offset + (i - before) * BLOCK, (n - (i - before)).min(max) * BLOCK)
    }
}

/// What one timed run of requests did.
#[derive(Default)]
struct Pumped {
    requests: u64,
    bytes: u64,
    seconds: f64,
}

impl Device {
    /// Open `path`: read-write only when there is a write range ending at `write_end`, and then
    /// a regular file (or a missing one, with its directories) is grown to that end, never
    /// shrunk; `O_DIRECT`, or buffered where the file system refuses it (EINVAL).
    fn open(path: &Path, write_end: Option<u64>) -> Result<Device, String> {
        let writable = write_end.is_some();
        let is_block = std::fs::metadata(path).map(|m| m.file_type().is_block_device()).unwrap_or(false);
        let create = writable && !is_block;
        if create {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
            }
        }
        let open = |direct: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(writable).create(create);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            o.open(path)
        };
        let mode = if writable { "read-write" } else { "read-only" };
        let (file, direct) = match open(true) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let f = open(false).map_err(|e| format!("opening {mode}: {e}"))?;
                (f, false)
            }
            Err(e) => return Err(format!("opening {mode}: {e}")),
        };
        let meta = file.metadata().map_err(|e| format!("stat: {e}"))?;
        let is_file = meta.is_file();
        let bytes = if meta.file_type().is_block_device() {
            sealer_storage::block_device_size(&file).map_err(|e| format!("reading the block device's size: {e}"))?
        } else if meta.is_file() {
            match write_end {
                Some(end) if meta.len() < end => {
                    file.set_len(end)
                        .map_err(|e| format!("growing the file to the write range's end ({end} bytes): {e}"))?;
                    end
                }
                _ => meta.len(),
            }
        } else {
            return Err("not a block device or a regular file".into());
        };
        Ok(Device { file, bytes, direct, is_file })
    }

    /// Sequential writes inside `range`, wrapping there, for `seconds`, then fdatasync.
    fn write_inside(&self, range: WriteRange, seconds: f64) -> Result<Pumped, String> {
        let mut next = range.offset;
        let t0 = Instant::now();
        let mut w = self.pump(SEQ_DEPTH, SEQ_BYTES, seconds, true, |_| {
            let (off, len) = (next, SEQ_BYTES.min(range.end() - next));
            next = if off + len == range.end() { range.offset } else { off + len };
            (off, len)
        })?;
        // SAFETY: plain syscall on the descriptor `self.file` holds open.
        if unsafe { libc::fdatasync(self.file.as_raw_fd()) } != 0 {
            let e = std::io::Error::last_os_error();
            // Block devices and tmpfs may answer EINVAL: nothing to flush there.
            if e.raw_os_error() != Some(libc::EINVAL) {
                return Err(format!("fdatasync after the writes: {e}"));
            }
        }
        w.seconds = t0.elapsed().as_secs_f64();
        Ok(w)
    }

    /// Keep `depth` requests of at most `unit` bytes in flight for `seconds`: each request's
    /// (offset, length) comes from `next` (given its buffer slot); reads, or writes of a
    /// pseudo-random pattern. Waits for every request before returning; the first failed one
    /// is the error.
    fn pump(
        &self,
        depth: usize,
        unit: u64,
        seconds: f64,
        write: bool,
        mut next: impl FnMut(usize) -> (u64, u64),
    ) -> Result<Pumped, String> {
        let what = if write { "write" } else { "read" };
        let mut ring = IoUring::new((depth as u32).next_power_of_two()).map_err(|e| format!("io_uring: {e}"))?;
        let fd = types::Fd(self.file.as_raw_fd());
        let unit_len = unit as usize;
        let mut bufs = AlignedBuf::new(depth * unit_len);
        if write {
            Rng::seeded().fill(bufs.as_mut_slice());
        }
        let base = bufs.as_mut_ptr();
        let mut inflight_at = vec![(0u64, 0u64); depth];
        let mut ready: Vec<usize> = (0..depth).collect();
        let mut done: Vec<(usize, i32)> = Vec::with_capacity(depth);
        let mut inflight = 0usize;
        let mut failure: Option<String> = None;
        let mut out = Pumped::default();
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs_f64(seconds);
        loop {
            if failure.is_none() && Instant::now() < deadline {
                let mut sq = ring.submission();
                for slot in ready.drain(..) {
                    let (off, len) = next(slot);
                    assert!(len > 0 && len <= unit && off % BLOCK == 0 && len % BLOCK == 0, "request {off}+{len}");
                    inflight_at[slot] = (off, len);
                    // SAFETY: slot < depth, so the slot's `unit` bytes lie inside `bufs`.
                    let buf = unsafe { base.add(slot * unit_len) };
                    let e = if write {
                        opcode::Write::new(fd, buf as *const u8, len as u32).offset(off).build()
                    } else {
                        opcode::Read::new(fd, buf, len as u32).offset(off).build()
                    };
                    // SAFETY: the descriptor (self.file) and the buffer (`bufs`, one slot per request in
                    // flight, never reused before its completion) outlive the request: this loop waits
                    // for every request it submitted, and leaks both when it cannot (below).
                    unsafe { sq.push(&e.user_data(slot as u64)) }.expect("the ring holds `depth` entries");
                    inflight += 1;
                }
            } else {
                ready.clear();
            }
            if inflight == 0 {
                break;
            }
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)) => {
                    continue
                }
                Err(e) => {
                    // Requests may still be in flight into `bufs`: keep it and the ring alive.
                    std::mem::forget(bufs);
                    std::mem::forget(ring);
                    return Err(format!("io_uring submit: {e}"));
                }
            }
            done.extend(ring.completion().map(|c| (c.user_data() as usize, c.result())));
            for (slot, res) in done.drain(..) {
                inflight -= 1;
                let (off, len) = inflight_at[slot];
                if res < 0 {
                    let e = std::io::Error::from_raw_os_error(-res);
                    failure.get_or_insert_with(|| format!("{what} of {len} bytes at offset {off}: {e}"));
                } else if res == 0 {
                    failure.get_or_insert_with(|| {
                        format!("{what} of {len} bytes at offset {off}: no bytes (end of file?)")
                    });
                } else {
                    out.requests += 1;
                    out.bytes += res as u64;
                }
                ready.push(slot);
            }
        }
        out.seconds = t0.elapsed().as_secs_f64();
        match failure {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// splitmix64: offsets and the write pattern; not for anything secret.
struct Rng(u64);

impl Rng {
    /// Seeded from the clock and the process id: each run reads other blocks.
    fn seeded() -> Rng {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        Rng(t as u64 ^ (std::process::id() as u64) << 32)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (n > 0; the multiply-shift bias is below 2^-40 for any device).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }

    /// Fill `buf` with pseudo-random bytes (drives that compress or skip zeros see real data).
    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(range: Option<WriteRange>) -> Options {
        Options { seconds: 0.2, depth: 16, write_range: range, ..Options::default() }
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
    }

    /// Reads and writes are measured; only the write range changes, and the file keeps its
    /// length.
    #[test]
    fn writes_only_inside_the_range() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("dev.img");
        let before = pattern(8 << 20);
        std::fs::write(&f, &before).unwrap();
        let range = WriteRange { offset: 3 << 20, length: (1 << 20) + 8192 };
        let r = measure(&f, &opts(Some(range)));
        assert!(r.error.is_none(), "{r:?}");
        assert!(r.random_read_iops.unwrap() > 0.0 && r.seq_read_bytes_per_s.unwrap() > 0.0, "{r:?}");
        assert!(r.seq_write_bytes_per_s.unwrap() > 0.0 && r.write_skipped.is_none(), "{r:?}");
        assert_eq!((r.bytes, r.queue_depth), (Some(8 << 20), 16));
        let after = std::fs::read(&f).unwrap();
        assert_eq!(after.len(), before.len());
        let (a, b) = (range.offset as usize, range.end() as usize);
        assert!(after[..a] == before[..a] && after[b..] == before[b..], "bytes outside the range changed");
        assert!(after[a..b] != before[a..b], "nothing was written inside the range");
    }

    /// A layer file not there yet (or shorter than the slot) is grown to the write range's
    /// end, as the sealer grows it, and measured on the data just written; what it held stays.
    #[test]
    fn layer_files_grow_to_the_write_range() {
        let dir = tempfile::tempdir().unwrap();
        let range = WriteRange { offset: 1 << 20, length: 1 << 20 };
        let fresh = dir.path().join("sub/fresh.img");
        let r = measure(&fresh, &opts(Some(range)));
        assert!(
            r.error.is_none() && r.random_read_iops.unwrap() > 0.0 && r.seq_write_bytes_per_s.unwrap() > 0.0,
            "{r:?}"
        );
        assert_eq!(std::fs::metadata(&fresh).unwrap().len(), 2 << 20);

        let short = dir.path().join("short.img");
        std::fs::write(&short, pattern(1 << 20)).unwrap();
        let r = measure(&short, &opts(Some(range)));
        assert!(r.error.is_none(), "{r:?}");
        assert_eq!(r.bytes, Some(2 << 20));
        assert_eq!(std::fs::read(&short).unwrap()[..1 << 20], pattern(1 << 20)[..], "bytes before the range changed");
    }

    /// Without a range a layer file is read where it holds data only: a scrubbed (hole-punched)
    /// file reads without touching the disk and would flatter it.
    #[test]
    fn files_are_read_where_they_hold_data() {
        let dir = tempfile::tempdir().unwrap();
        let sparse = dir.path().join("sparse.img");
        let f = std::fs::File::create(&sparse).unwrap();
        f.set_len(8 << 20).unwrap();
        let r = measure(&sparse, &opts(None));
        assert!(r.error.as_deref().unwrap().contains("only holes"), "{r:?}");
        // Data in the middle: the reads go there.
        use std::os::unix::fs::FileExt;
        f.write_all_at(&pattern(1 << 20), 3 << 20).unwrap();
        f.sync_all().unwrap();
        let e = Extents::of_data(&f, 8 << 20).unwrap();
        assert_eq!((e.blocks(), e.block(0), e.block(255)), (256, 3 << 20, (4 << 20) - 4096));
        assert_eq!(e.run(250, 256), ((3 << 20) + 250 * 4096, 6 * 4096));
        let r = measure(&sparse, &opts(None));
        assert!(r.error.is_none() && r.random_read_iops.unwrap() > 0.0, "{r:?}");
    }

    /// Without a range nothing is written, and the file may be read-only to us.
    #[test]
    fn no_range_skips_the_write_with_the_reason_given() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ro.img");
        std::fs::write(&f, pattern(1 << 20)).unwrap();
        let mut o = opts(None);
        o.no_write_reason = "no free slot to write in".into();
        let r = measure(&f, &o);
        assert!(r.error.is_none() && r.random_read_iops.unwrap() > 0.0, "{r:?}");
        assert_eq!(r.write_skipped.as_deref(), Some("no free slot to write in"));
        assert!(r.seq_write_bytes_per_s.is_none());
        assert_eq!(std::fs::read(&f).unwrap(), pattern(1 << 20));
    }

    /// Per-device errors: a missing path (not created), a file under 4 KiB, a range past the
    /// end (nothing written, the reads still measured), a directory.
    #[test]
    fn failures_are_the_devices_error_and_touch_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.img");
        let r = measure(&missing, &opts(None));
        assert!(r.error.as_deref().unwrap().contains("opening read-only"), "{r:?}");
        assert!(!missing.exists(), "a missing device was created without a write range");
        assert!(r.bytes.is_none() && r.random_read_iops.is_none());

        let small = dir.path().join("small.img");
        std::fs::write(&small, [1u8; 4000]).unwrap();
        let r = measure(&small, &opts(None));
        assert!(r.error.as_deref().unwrap().starts_with("nothing to read"), "{r:?}");
        assert_eq!(r.bytes, Some(4000));

        let r = measure(dir.path(), &opts(None));
        assert!(r.error.as_deref().unwrap().contains("not a block device"), "{r:?}");
    }

    /// On tmpfs (`O_DIRECT` refused by kernels before 6.6) the figures come from buffered I/O
    /// and say so; `direct` is true exactly when an `O_DIRECT` open works there.
    #[test]
    fn tmpfs_is_measured_buffered_where_direct_io_is_refused() {
        let Ok(dir) = tempfile::tempdir_in("/dev/shm") else { return };
        let f = dir.path().join("dev.img");
        std::fs::write(&f, pattern(2 << 20)).unwrap();
        let r = measure(&f, &opts(Some(WriteRange { offset: 1 << 20, length: 1 << 20 })));
        assert!(r.error.is_none() && r.seq_write_bytes_per_s.unwrap() > 0.0, "{r:?}");
        let direct_opens = OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&f).is_ok();
        assert_eq!(r.direct, Some(direct_opens));
        assert_eq!(std::fs::read(&f).unwrap()[..1 << 20], pattern(2 << 20)[..1 << 20]);
    }

    #[test]
    fn random_blocks_cover_the_device_uniformly() {
        let mut rng = Rng(1);
        let mut seen = [0u32; 8];
        for _ in 0..8000 {
            seen[rng.below(8) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
    }
}
