//! PC2 ranges in flight on one device. Each [`Slot`] owns two queues and every device buffer a
//! range needs, made once for the run; [`Gpu::submit`] enqueues a range's uploads, kernels and
//! readbacks and returns at once, [`Gpu::collect`] waits for them. With two or more slots the
//! device hashes one range while the host checks and writes the one before, and no host wait
//! sits between one range's kernels and the next's.
//!
//! Readbacks go into page-locked host memory from a pool the device's slots share (one set
//! more than there are slots, so a collected range can be written while the others run), and
//! only the rows that are stored come back: tree-r-last's discarded levels stay on the device,
//! and so does a CC sector's replica (it is the last layer, already on the host). Levels with
//! fewer than [`MIN_DEVICE_LEVEL`] nodes are left to the CPU's tree builders.

use crate::{chunks, interval, overlap_ns, seconds, DeviceTime, Gpu, GpuError, Pinned, RangeInput, COPY_CHUNKS, NODE};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::event::Event;
use opencl3::kernel::ExecuteKernel;
use opencl3::memory::Buffer;
use opencl3::types::{cl_uint, cl_ulong, CL_NON_BLOCKING};
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// The fewest nodes (all sectors, one tree) a level must have to be hashed on the device:
/// smaller levels cost a launch each for a few thousand hashes, so the CPU's tree builders
/// hash them instead.
pub const MIN_DEVICE_LEVEL: usize = 2048;

/// What every range of a run looks like; a [`Slot`]'s buffers are made for it once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeShape {
    /// Layers a column holds (2 or 11).
    pub layers: usize,
    /// Bytes of one row of the layer pages (one node of every sector).
    pub row: usize,
    /// The most rows a range (a device's part of one) has.
    pub count: usize,
    /// Sectors in the batch.
    pub sectors: usize,
    /// Whether ranges carry deal data (then the replica, key + data, is read back; without
    /// data the replica is the last layer, which the host already has).
    pub with_data: bool,
    /// tree-r-last's first stored level: the levels below it (other than the replica, above)
    /// are never read back. The device's top level is always read back, for the CPU to hash on.
    pub tree_r_from: usize,
}

impl RangeShape {
    /// Levels the device computes for a range of `count` rows: level 0 (the column hashes and
    /// the replica), then each arity-8 level while every sector's count divides by 8 and the
    /// level has at least [`MIN_DEVICE_LEVEL`] nodes.
    pub fn levels(&self, count: usize) -> usize {
        let (mut n, mut levels) = (count, 1);
        while n.is_multiple_of(8) && n >= 8 && (n / 8) * self.sectors >= MIN_DEVICE_LEVEL {
            n /= 8;
            levels += 1;
        }
        levels
    }

    /// Whether tree-r-last's level `j` of `levels` is read back.
    fn reads_tree_r(&self, j: usize, levels: usize) -> bool {
        if j == 0 {
            self.with_data
        } else {
            j >= self.tree_r_from || j + 1 == levels
        }
    }

    /// Host bytes one range's readbacks take at most.
    pub fn readback_bytes(&self) -> usize {
        let levels = self.levels(self.count);
        (0..levels)
            .map(|j| {
                let level = (self.count >> (3 * j)) * self.sectors * NODE;
                level * (1 + self.reads_tree_r(j, levels) as usize)
            })
            .sum()
    }

    /// Device bytes one slot takes: the layer chunks, the data, and both trees' levels.
    pub fn device_bytes(&self) -> usize {
        let nodes = self.count * self.sectors * NODE;
        let levels: usize =
            (0..self.levels(self.count)).map(|j| 2 * (self.count >> (3 * j)) * self.sectors * NODE).sum();
        self.layers * nodes + if self.with_data { nodes } else { 0 } + levels
    }
}

/// Page-locked readback sets a device's slots share; a set goes back when the range's output
/// that holds it is dropped. A caller that keeps more outputs than the pool holds gets new
/// sets rather than a wait that would never end (PC2 keeps one while the others run).
struct Pool {
    free: Mutex<Vec<Pinned>>,
    bytes: usize,
}

impl Pool {
    fn take(&self, gpu: &Gpu) -> Result<Pinned, GpuError> {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match free {
            Some(p) => Ok(p),
            None => gpu.pinned(self.bytes),
        }
    }

    fn give(&self, p: Pinned) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(p);
    }
}

/// One range's outputs on the host, each level `[sector][node]` (32 bytes a node, canonical
/// little-endian). The page-locked memory goes back to its device's pool when this is dropped.
pub struct RangeOutput {
    host: Option<Pinned>,
    pool: Arc<Pool>,
    count: usize,
    sectors: usize,
    levels: usize,
    c: Vec<Range<usize>>,
    r: Vec<Option<Range<usize>>>,
    /// Where the device's time went.
    pub time: DeviceTime,
}

impl RangeOutput {
    /// Rows of the range (of each sector).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Sectors.
    pub fn sectors(&self) -> usize {
        self.sectors
    }

    /// Levels the device computed (the same for both trees); the top one is `levels() - 1`.
    pub fn levels(&self) -> usize {
        self.levels
    }

    fn bytes(&self, at: &Range<usize>) -> &[u8] {
        &self.host.as_ref().expect("held until dropped").as_slice()[at.clone()]
    }

    /// tree-c's level `j` (level 0: the column hashes), `count / 8^j` nodes a sector.
    pub fn tree_c(&self, j: usize) -> &[u8] {
        self.bytes(&self.c[j])
    }

    /// tree-r-last's level `j` where it was read back (level 0, the replica, only with data;
    /// levels below the first stored one never, except the device's top level).
    pub fn tree_r(&self, j: usize) -> Option<&[u8]> {
        self.r[j].as_ref().map(|at| self.bytes(at))
    }
}

impl Drop for RangeOutput {
    fn drop(&mut self) {
        if let Some(p) = self.host.take() {
            self.pool.give(p);
        }
    }
}

/// A range enqueued on a slot and not collected yet.
struct Flight {
    count: usize,
    levels: usize,
    host: Pinned,
    c: Vec<Range<usize>>,
    r: Vec<Option<Range<usize>>>,
    columns: Vec<Event>,
    trees: Vec<Event>,
    reads: Vec<Event>,
}

/// Device buffers and queues for one range in flight ([`Gpu::slots`]).
pub struct Slot {
    shape: RangeShape,
    queue: CommandQueue,
    copy_queue: CommandQueue,
    chunks: Vec<Buffer<u8>>,
    data: Buffer<u8>,
    data_host: Option<Pinned>,
    levels: Vec<Buffer<u8>>,
    pool: Arc<Pool>,
    flight: Option<Flight>,
    /// Uploads enqueued and not known finished: waited for before any host memory they read
    /// can be freed ([`Slot::uploads_in_flight`]).
    uploads: Vec<Event>,
    fail_upload: Option<usize>,
    spoil: Option<Spoil>,
}

/// A device fault injected by tests (`SEALER_TEST_GPU_SPOIL`), which the per-range check must
/// catch: every column hash, or every tree-c node of level 1, overwritten on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spoil {
    Columns,
    Tree,
}

impl Spoil {
    fn parse(s: &str) -> Option<Spoil> {
        match s {
            "columns" => Some(Spoil::Columns),
            "tree" => Some(Spoil::Tree),
            _ => None,
        }
    }
}

impl Slot {
    /// Uploads enqueued and not yet waited for: 0 whenever [`Gpu::submit`] has returned an
    /// error (it waits for every copy it started before it returns).
    pub fn uploads_in_flight(&self) -> usize {
        self.uploads.len()
    }

    /// Whether a range is enqueued and not collected.
    pub fn busy(&self) -> bool {
        self.flight.is_some()
    }

    /// Tests: fail the `n`th layer upload (from 1) of every range submitted to this slot.
    #[doc(hidden)]
    pub fn fail_upload_for_test(&mut self, n: Option<usize>) {
        self.fail_upload = n;
    }

    /// Tests: spoil every column hash (`columns`) or tree-c's level 1 (`tree`) on the device,
    /// as `SEALER_TEST_GPU_SPOIL` does for a whole run.
    #[doc(hidden)]
    pub fn spoil_for_test(&mut self, what: Option<&str>) {
        self.spoil = what.and_then(Spoil::parse);
    }

    /// Wait for everything enqueued on this slot and forget it.
    fn drain(&mut self) {
        let _ = self.copy_queue.finish();
        let _ = self.queue.finish();
        self.uploads.clear();
        self.flight = None;
    }
}

impl Drop for Slot {
    /// Host memory an upload reads (the caller's layer pages) may be freed right after this:
    /// nothing of this slot's is left running.
    fn drop(&mut self) {
        self.drain();
    }
}

impl Gpu {
    /// `n` slots for ranges of `shape` on this device, their buffers made now, and a pool of
    /// `n + 1` page-locked readback sets they share.
    pub fn slots(&self, shape: RangeShape, n: usize) -> Result<Vec<Slot>, GpuError> {
        assert!(shape.layers == 2 || shape.layers == 11, "PC2 hashes columns of 2 or 11 layers");
        // The kernels index nodes with 32-bit integers: both trees' leaves of a range.
        assert!(
            2 * shape.count * shape.sectors <= u32::MAX as usize,
            "a range of {} rows of {} sectors is too large for the kernels' 32-bit indices",
            shape.count,
            shape.sectors
        );
        self.poseidon(shape.layers)?;
        self.poseidon(8)?;
        let pool = Arc::new(Pool { free: Mutex::new(Vec::new()), bytes: shape.readback_bytes() });
        for _ in 0..=n {
            pool.give(self.pinned(pool.bytes)?);
        }
        let spoil = std::env::var("SEALER_TEST_GPU_SPOIL").ok().as_deref().and_then(Spoil::parse);
        let chunk_rows = shape.count.div_ceil(COPY_CHUNKS).max(1);
        (0..n)
            .map(|_| {
                let queue = CommandQueue::create_default(&self.context, CL_QUEUE_PROFILING_ENABLE)
                    .map_err(|e| self.call("creating a queue", e))?;
                let copy_queue = CommandQueue::create_default(&self.context, CL_QUEUE_PROFILING_ENABLE)
                    .map_err(|e| self.call("creating a copy queue", e))?;
                let chunks = (0..COPY_CHUNKS.min(shape.count.max(1)))
                    .map(|_| self.buffer(shape.layers * chunk_rows * shape.row))
                    .collect::<Result<_, _>>()?;
                let nodes = shape.count * shape.sectors * NODE;
                let (data, data_host) = if shape.with_data {
                    (self.buffer(nodes)?, Some(self.pinned(nodes)?))
                } else {
                    (self.buffer(0)?, None)
                };
                let levels = (0..shape.levels(shape.count))
                    .map(|j| self.buffer(2 * (shape.count >> (3 * j)) * shape.sectors * NODE))
                    .collect::<Result<_, _>>()?;
                Ok(Slot {
                    shape,
                    queue,
                    copy_queue,
                    chunks,
                    data,
                    data_host,
                    levels,
                    pool: pool.clone(),
                    flight: None,
                    uploads: Vec::new(),
                    fail_upload: None,
                    spoil,
                })
            })
            .collect()
    }

    /// Enqueue one range of PC2 for all sectors on `slot` and return without waiting: the
    /// layers go in by chunks on the slot's copy queue, each chunk's columns are hashed as it
    /// arrives, then both trees' levels (one launch a level), then the stored rows come back
    /// into page-locked memory. On an error, every copy already started is waited for before
    /// this returns.
    ///
    /// # Safety
    /// The memory `r` borrows (the layer pages) must stay alive and unchanged until
    /// [`Gpu::collect`] returns for this slot, or the slot is dropped: the device reads it in
    /// the background. The data is copied before this returns.
    pub unsafe fn submit(&self, slot: &mut Slot, r: &RangeInput) -> Result<(), GpuError> {
        assert!(slot.flight.is_none(), "a slot holds one range at a time");
        let sh = slot.shape;
        assert_eq!(r.layers.len(), sh.layers, "the slot's layers");
        assert!(r.count <= sh.count && r.sectors == sh.sectors && r.row == sh.row, "the slot's shape");
        assert_eq!(r.data.is_some(), sh.with_data, "data as the slot was made for");
        let stride = r.layers[0].len();
        assert!(r.layers.iter().all(|l| l.len() == stride) && stride.is_multiple_of(NODE));
        assert!((r.first_row + r.count) * r.row <= stride, "the range lies inside the pages");
        match self.enqueue(slot, r) {
            Ok(f) => {
                slot.flight = Some(f);
                Ok(())
            }
            Err(e) => {
                slot.drain();
                Err(e)
            }
        }
    }

    fn enqueue(&self, slot: &mut Slot, r: &RangeInput) -> Result<Flight, GpuError> {
        let sh = slot.shape;
        let p = self.poseidon(sh.layers)?;
        let p8 = self.poseidon(8)?;
        let nodes = r.count * r.sectors;
        let mut data_arrived = Vec::new();
        if let (Some(d), Some(host)) = (r.data, slot.data_host.as_mut()) {
            assert_eq!(d.len(), nodes * NODE, "data is [sector][node] for the range");
            host.as_mut_slice()[..d.len()].copy_from_slice(d);
            let ev = unsafe {
                slot.copy_queue.enqueue_write_buffer(
                    &mut slot.data,
                    CL_NON_BLOCKING,
                    0,
                    &host.as_slice()[..d.len()],
                    &[],
                )
            }
            .map_err(|e| self.call("copying data to the device", e))?;
            data_arrived.push(ev.get());
            slot.uploads.push(ev);
        }
        let k = self.kernel(&p, "columns")?;
        let mut columns = Vec::new();
        let mut upload = 0usize;
        for ((i0, cc), cb) in chunks(r.count, COPY_CHUNKS).zip(slot.chunks.iter_mut()) {
            let bytes = (r.first_row + i0) * r.row..(r.first_row + i0 + cc) * r.row;
            let chunk_stride = bytes.len();
            let mut arrived = data_arrived.clone();
            for (l, layer) in r.layers.iter().enumerate() {
                upload += 1;
                if slot.fail_upload == Some(upload) {
                    return Err(self.call("copying layers to the device", "injected failure (test)"));
                }
                let ev = unsafe {
                    slot.copy_queue.enqueue_write_buffer(
                        cb,
                        CL_NON_BLOCKING,
                        l * chunk_stride,
                        &layer[bytes.clone()],
                        &[],
                    )
                }
                .map_err(|e| self.call("copying layers to the device", e))?;
                arrived.push(ev.get());
                slot.uploads.push(ev);
            }
            slot.copy_queue.flush().map_err(|e| self.call("starting the copies", e))?;
            let mut exec = ExecuteKernel::new(&k);
            unsafe {
                exec.set_arg(&*cb)
                    .set_arg(&((chunk_stride / NODE) as cl_ulong))
                    .set_arg(&((r.row / NODE) as cl_uint))
                    .set_arg(&0u32)
                    .set_arg(&(r.count as cl_uint))
                    .set_arg(&(i0 as cl_uint))
                    .set_arg(&(cc as cl_uint))
                    .set_arg(&(r.sectors as cl_uint))
                    .set_arg(&slot.data)
                    .set_arg(&(r.data.is_some() as cl_uint))
                    .set_arg(&slot.levels[0])
                    .set_arg(&p.constants)
                    .set_event_wait_list(&arrived);
            }
            self.shape_launch(&mut exec, cc * r.sectors);
            let ev = unsafe { exec.enqueue_nd_range(&slot.queue) }.map_err(|e| self.call("running columns", e))?;
            slot.queue.flush().map_err(|e| self.call("starting columns", e))?;
            columns.push(ev);
        }
        let pattern = [0x5au8; NODE]; // not a field element: no honest hash gives it
        if slot.spoil == Some(Spoil::Columns) {
            let (buf, len) = (&mut slot.levels[0], nodes * NODE);
            unsafe { slot.queue.enqueue_fill_buffer(buf, &pattern, 0, len, &[]) }
                .map_err(|e| self.call("spoiling the columns (test)", e))?;
        }
        // Both trees' level j are one buffer, tree-c's half first: one launch hashes both.
        let levels = sh.levels(r.count);
        let hash = self.kernel(&p8, "hash_groups")?;
        let mut trees = Vec::new();
        for j in 1..levels {
            let n = 2 * (r.count >> (3 * j)) * r.sectors;
            let (below, above) = slot.levels.split_at(j);
            let mut exec = ExecuteKernel::new(&hash);
            unsafe {
                exec.set_arg(&below[j - 1]).set_arg(&above[0]).set_arg(&(n as cl_uint)).set_arg(&p8.constants);
            }
            self.shape_launch(&mut exec, n);
            trees
                .push(unsafe { exec.enqueue_nd_range(&slot.queue) }.map_err(|e| self.call("running a tree level", e))?);
            if j == 1 && slot.spoil == Some(Spoil::Tree) {
                let len = n / 2 * NODE;
                unsafe { slot.queue.enqueue_fill_buffer(&mut slot.levels[1], &pattern, 0, len, &[]) }
                    .map_err(|e| self.call("spoiling a tree level (test)", e))?;
            }
        }
        // The stored rows back into page-locked memory, after the kernels (the queue is in
        // order), without waiting.
        let mut host = slot.pool.take(self)?;
        let (mut c, mut rr, mut reads, mut at) = (Vec::new(), Vec::new(), Vec::new(), 0usize);
        let mut read_back = || -> Result<(), GpuError> {
            for j in 0..levels {
                let len = (r.count >> (3 * j)) * r.sectors * NODE;
                let mut read = |offset: usize| -> Result<Range<usize>, GpuError> {
                    let dst = &mut host.as_mut_slice()[at..at + len];
                    let ev =
                        unsafe { slot.queue.enqueue_read_buffer(&slot.levels[j], CL_NON_BLOCKING, offset, dst, &[]) }
                            .map_err(|e| self.call("copying from the device", e))?;
                    reads.push(ev);
                    at += len;
                    Ok(at - len..at)
                };
                c.push(read(0)?);
                rr.push(if sh.reads_tree_r(j, levels) { Some(read(len)?) } else { None });
            }
            slot.queue.flush().map_err(|e| self.call("starting the readbacks", e))
        };
        if let Err(e) = read_back() {
            slot.drain();
            slot.pool.give(host);
            return Err(e);
        }
        Ok(Flight { count: r.count, levels, host, c, r: rr, columns, trees, reads })
    }

    /// `n` work-items of a launch. On a CPU device (pocl) in work-groups of a fixed size, the
    /// global size rounded up (the kernels skip the ids past their count): pocl compiles a
    /// kernel for every work-group size, and picks one per global size. On GPUs the driver's
    /// choice, which `bench gpu-kernels` measures against fixed sizes.
    fn shape_launch(&self, exec: &mut ExecuteKernel, n: usize) {
        const CPU_LOCAL: usize = 64;
        if self.info.kind == "cpu" {
            exec.set_global_work_size(n.div_ceil(CPU_LOCAL) * CPU_LOCAL).set_local_work_size(CPU_LOCAL);
        } else {
            exec.set_global_work_size(n);
        }
    }

    /// Wait for the range on `slot` and hand over its outputs; the slot takes the next range.
    pub fn collect(&self, slot: &mut Slot) -> Result<RangeOutput, GpuError> {
        let Some(f) = slot.flight.take() else { panic!("collect: nothing was submitted to this slot") };
        let waited = f.reads.last().map_or(Ok(()), |ev| ev.wait()).and_then(|()| slot.queue.finish());
        if let Err(e) = waited {
            slot.pool.give(f.host);
            slot.drain();
            return Err(self.call("running a range", e));
        }
        let _ = slot.copy_queue.finish();
        let mut time = DeviceTime::default();
        let sum = |evs: &[Event]| evs.iter().map(seconds).sum::<f64>();
        time.uploads = sum(&slot.uploads);
        time.column_kernels = sum(&f.columns);
        time.tree_kernels = sum(&f.trees);
        time.readbacks = sum(&f.reads);
        time.kernels = time.column_kernels + time.tree_kernels;
        time.transfers = time.uploads + time.readbacks;
        let ran: Vec<(u64, u64)> = f.columns.iter().filter_map(interval).collect();
        let copied: Vec<(u64, u64)> = slot.uploads.iter().filter_map(interval).collect();
        time.overlapped = overlap_ns(&ran, &copied) as f64 * 1e-9;
        slot.uploads.clear();
        Ok(RangeOutput {
            host: Some(f.host),
            pool: slot.pool.clone(),
            count: f.count,
            sectors: slot.shape.sectors,
            levels: f.levels,
            c: f.c,
            r: f.r,
            time,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{RangeShape, MIN_DEVICE_LEVEL};
    use crate::NODE;

    #[test]
    fn only_stored_rows_and_the_top_come_back() {
        // 128 sectors of 32 GiB, ranges of 2^14 rows: tree-r-last stores from level 3.
        let s =
            RangeShape { layers: 11, row: 128 * NODE, count: 1 << 14, sectors: 128, with_data: false, tree_r_from: 3 };
        let levels = s.levels(s.count);
        assert_eq!(levels, 4, "2^14, 2^11, 2^8 and 2^5 rows of 128 sectors; 2^2 x 128 < {MIN_DEVICE_LEVEL}");
        let read: Vec<bool> = (0..levels).map(|j| s.reads_tree_r(j, levels)).collect();
        assert_eq!(read, [false, false, false, true], "CC: no replica, levels 1 and 2 discarded");
        let with_data = RangeShape { with_data: true, ..s };
        assert!(with_data.reads_tree_r(0, levels), "data: the replica comes back");
        // tree-c's levels, all of them, and tree-r-last's stored one.
        let node_rows: usize = (0..levels).map(|j| s.count >> (3 * j)).sum::<usize>() + (s.count >> 9);
        assert_eq!(s.readback_bytes(), node_rows * s.sectors * NODE);
        // A shape whose top level is below the first stored one still reads its top back.
        let small = RangeShape { count: 1 << 11, sectors: 8, ..s };
        assert_eq!(small.levels(small.count), 2);
        assert!(!small.reads_tree_r(0, 2) && small.reads_tree_r(1, 2));
    }
}
