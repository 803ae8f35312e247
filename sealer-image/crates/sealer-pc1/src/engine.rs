//! The batch labelling engine: one layer at a time, all sectors at once.
//!
//! Threads per layer (all pinned per the layout):
//! * **reader** — for chunk `c`, resolves the 14 parents of every node: near base parents
//!   come from the node cache (ring), far base parents and all expander parents are read as
//!   4 KiB pages (deduplicated per chunk) into a read-ahead slot; runs `depth` chunks ahead.
//! * **coordinator** (one per L3 group, when it has a CPU no hasher uses) — prefetches the parent
//!   rows of the group's columns for the chunk after the one its hashers are on, so they find
//!   them in cache. It copies nothing and hashers never wait for it.
//! * **hashers** — each owns a fixed set of sectors (its columns of every row) and hashes three
//!   sectors per SHA-NI call, reading every parent where it lies (node cache, previous layer,
//!   read slot): no parent is copied. Hashers never wait on each other: a sector's labels
//!   depend only on the same sector.
//! * **writer** — writes each finished chunk's pages from the ring, striped over the devices.
//!
//! The orchestrator (the calling thread) reports progress and sequences layers.

use crate::sync::{Aborted, Counter};
use crate::SealerError;
use sealer_graph::Parents;
use sealer_hash::{parents_of_layer, LabelHasher, DEGREE};
use sealer_progress::LiveStats;
use sealer_slot::Geometry;
use sealer_storage::{coalesce, AlignedBuf, HugeArena, PageBackend, PageIo, Stripe, PAGE};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

const RING_FLAG: u32 = 1 << 31;
/// Parent served from the previous layer in memory: kept whole (when a layer fits), or its
/// resident part (node < `Geometry::resident`).
const PREV_FLAG: u32 = 1 << 30;

/// A hasher thread's assignment.
#[derive(Clone, Debug)]
pub struct HasherPlan {
    /// CPU to pin to.
    pub cpu: usize,
    /// First sector (column) it hashes.
    pub first: usize,
    /// Number of sectors.
    pub count: usize,
}

/// A coordinator and its hashers (one L3 group).
#[derive(Clone, Debug)]
pub struct GroupPlan {
    /// CPU to pin to.
    pub cpu: usize,
    /// First sector of the group.
    pub first: usize,
    /// Sectors in the group.
    pub count: usize,
    /// Hashers of the group.
    pub hashers: Vec<HasherPlan>,
}

impl GroupPlan {
    /// Whether the coordinator runs: only on a CPU of its own. Sharing a hasher's CPU, its
    /// prefetching costs that hasher more than the cache hits give back (measured: 4 % slower at
    /// 8 MiB, N = 32 and 128, on 2 vCPUs).
    pub fn prefetches(&self) -> bool {
        self.hashers.iter().all(|h| h.cpu != self.cpu)
    }
}

/// Thread placement for the engine.
#[derive(Clone, Debug)]
pub struct ThreadPlan {
    /// Groups in order.
    pub groups: Vec<GroupPlan>,
    /// Reader CPU.
    pub reader: usize,
    /// Writer CPU.
    pub writer: usize,
    /// Orchestrator CPU.
    pub orchestrator: usize,
    /// Whether to pin threads at all.
    pub pin: bool,
}

impl ThreadPlan {
    /// Build from a validated layout.
    pub fn from_layout(l: &sealer_config::Layout, pin: bool) -> ThreadPlan {
        let mut groups = Vec::new();
        let mut next = 0;
        for c in &l.coordinators {
            let first = next;
            let mut hashers = Vec::new();
            for h in &c.hashers {
                hashers.push(HasherPlan { cpu: h.cpu, first: next, count: h.sectors });
                next += h.sectors;
            }
            groups.push(GroupPlan { cpu: c.cpu, first, count: next - first, hashers });
        }
        ThreadPlan { groups, reader: l.roles.reader, writer: l.roles.writer, orchestrator: l.roles.orchestrator, pin }
    }

    fn hashers(&self) -> usize {
        self.groups.iter().map(|g| g.hashers.len()).sum()
    }
}

/// Pin the calling thread to one CPU (best effort; returns false on failure).
pub fn pin_to(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is a plain bitmask, so all-zero (the empty set) is valid; CPU_SET indexes its
    // array with a bounds check (panics for cpu >= 1024); sched_setaffinity reads exactly
    // size_of::<cpu_set_t>() bytes from the local `set`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The calling thread's CPU mask, to restore after temporary pinning.
pub struct SavedAffinity(libc::cpu_set_t);

impl SavedAffinity {
    /// Save the calling thread's mask.
    pub fn save() -> Option<SavedAffinity> {
        // SAFETY: an all-zero cpu_set_t is valid; sched_getaffinity writes at most
        // size_of::<cpu_set_t>() bytes into the local `set`.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
                .then_some(SavedAffinity(set))
        }
    }
    /// Restore it on the calling thread.
    pub fn restore(&self) {
        // SAFETY: sched_setaffinity reads size_of::<cpu_set_t>() bytes from self.0, a valid cpu_set_t.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0);
        }
    }
}

/// Long-lived buffers of a batch run (allocated once, reused per layer).
pub struct Buffers {
    rings: Vec<AlignedBuf>,
    /// The resident part of the previous layer (`Geometry::resident` rows).
    resident: AlignedBuf,
    slot_pages: Vec<AlignedBuf>,
    _slot_tables: Vec<Mutex<Vec<u32>>>,
    tables_ptr: Vec<*mut u32>,
    max_pages: usize,
}
// SAFETY: the `tables_ptr` pointers point into the heap buffers of the Vec<u32>s owned by
// `_slot_tables`, which are never resized and are dropped with Buffers, so they stay valid wherever
// Buffers is moved; every other field is Send.
unsafe impl Send for Buffers {}
// SAFETY: Buffers has no method that writes through `&self`. The engine threads (run_layer) write
// the tables through `tables_ptr` and the AlignedBufs only in the slots, rows and columns the
// protocol assigns them, ordered by the read_ready / hash_done / written counters
// (Release/Acquire), so no byte is written by one thread while another thread accesses it.
unsafe impl Sync for Buffers {}

impl Buffers {
    /// Bytes of the large buffers for `g`: node-cache rings, the resident part of the previous
    /// layer and the read slots (what [`Buffers::new`] puts on hugepages when it can).
    pub fn bytes(g: &Geometry) -> usize {
        let k = g.chunk as usize;
        let nrings = if g.keep_prev_layer { 2 } else { 1 };
        nrings * (g.ring as usize * g.row).next_multiple_of(PAGE)
            + g.resident as usize * g.row
            + g.depth as usize * k * DEGREE * PAGE
    }

    /// Allocate for `g` and `plan`, from `arena` (1 GiB hugepages) while it has room, the
    /// node-cache rings first (the largest and most randomly read), then the heap.
    pub fn new(g: &Geometry, arena: Option<&HugeArena>) -> Buffers {
        let k = g.chunk as usize;
        let max_pages = k * DEGREE;
        let nrings = if g.keep_prev_layer { 2 } else { 1 };
        let buf = |len: usize| AlignedBuf::new_in(arena, len);
        let rings = (0..nrings).map(|_| buf(g.ring as usize * g.row)).collect();
        let resident = if g.resident > 0 { buf(g.resident as usize * g.row) } else { AlignedBuf::new(0) };
        let slot_pages = (0..g.depth).map(|_| buf(max_pages * PAGE)).collect();
        let slot_tables: Vec<Mutex<Vec<u32>>> = (0..g.depth).map(|_| Mutex::new(vec![0u32; k * DEGREE])).collect();
        let tables_ptr = slot_tables.iter().map(|m| m.lock().unwrap().as_mut_ptr()).collect();
        Buffers { rings, resident, slot_pages, _slot_tables: slot_tables, tables_ptr, max_pages }
    }

    /// Bytes of the large buffers on hugepages and on ordinary pages.
    pub fn backing(&self) -> (usize, usize) {
        let all = self.rings.iter().chain([&self.resident]).chain(&self.slot_pages);
        all.fold((0, 0), |(h, o), b| if b.on_hugepages() { (h + b.len(), o) } else { (h, o + b.len()) })
    }

    /// Regions worth registering with the backend (ring and read slots).
    pub fn io_regions(&self) -> Vec<(*mut u8, usize)> {
        let mut v: Vec<(*mut u8, usize)> =
            self.rings.iter().map(|r| (r.as_mut_ptr(), r.len().div_ceil(PAGE) * PAGE)).collect();
        for s in &self.slot_pages {
            v.push((s.as_mut_ptr(), s.len()));
        }
        v
    }
}

struct LayerShared<'a> {
    g: Geometry,
    layer: u32,
    parents: &'a Parents,
    stripe: Stripe,
    bufs: &'a Buffers,
    replica_ids: &'a [[u8; 32]],
    hasher: LabelHasher,
    read_ready: Counter,
    hash_done: Vec<Counter>,
    /// Chunks each group's coordinator is done with (prefetched or skipped as late).
    prefetched: Vec<Counter>,
    written: Counter,
    abort: AtomicBool,
    error: Mutex<Option<SealerError>>,
    stats: &'a LiveStats,
    slow_chunk_us: u64,
    prev_in_memory: bool,
    /// Expander parents below `g.resident` come from the resident buffer (layer ≥ 2).
    resident: bool,
}

impl LayerShared<'_> {
    fn fail(&self, e: SealerError) {
        let mut slot = self.error.lock().unwrap();
        if slot.is_none() {
            *slot = Some(e);
        }
        self.abort.store(true, Ordering::SeqCst);
        self.read_ready.poke();
        self.written.poke();
        for c in self.hash_done.iter().chain(&self.prefetched) {
            c.poke();
        }
    }

    fn wait_all(&self, cs: &[Counter], target: u64) -> Result<(), Aborted> {
        for c in cs {
            c.wait_at_least(target, &self.abort)?;
        }
        Ok(())
    }

    fn chunk_range(&self, c: u64) -> (u64, u64) {
        let v0 = c * self.g.chunk;
        (v0, (v0 + self.g.chunk).min(self.g.nodes))
    }

    fn ring_ptr(&self, node: u64) -> *mut u8 {
        let r = &self.bufs.rings[self.layer as usize % self.bufs.rings.len()];
        // SAFETY: (node % ring) * row < ring * row, the length of each ring buffer, given that `bufs`
        // was built for this Geometry (run_layer's documented requirement).
        unsafe { r.as_mut_ptr().add((node % self.g.ring) as usize * self.g.row) }
    }

    /// Row of node `p` of the previous layer when it is held in memory (whole, or resident).
    fn prev_ptr(&self, p: u64) -> *mut u8 {
        let r = if self.prev_in_memory { &self.bufs.rings[(self.layer as usize + 1) % 2] } else { &self.bufs.resident };
        // SAFETY: only called for PREV_FLAG entries. With prev_in_memory (hence keep_prev_layer)
        // there are two rings of ring = padded >= nodes rows, so p * row is in bounds when p < nodes;
        // otherwise the reader made the entry only for p < resident, the resident buffer's rows.
        // NOT checked: p is an expander parent read from the mmapped parent cache, whose values are
        // trusted; a corrupt cache file makes this offset (and the copy after it) OOB.
        unsafe { r.as_mut_ptr().add(p as usize * self.g.row) }
    }

    /// Row holding parent entry `e` of a reader table whose chunk's pages are at `pages`.
    fn parent_row(&self, e: u32, pages: *mut u8) -> *const u8 {
        if e & RING_FLAG != 0 {
            self.ring_ptr((e & !RING_FLAG) as u64)
        } else if e & PREV_FLAG != 0 {
            self.prev_ptr((e & !PREV_FLAG) as u64)
        } else {
            // Page entries index the slot's pages: e < map.len() * npp <= max_pages * npp rows
            // (npp * row = PAGE), so the row lies in the slot. Not dereferenced here.
            pages.wrapping_add(e as usize * self.g.row)
        }
    }

    /// Prefetch the columns `sectors` of the row holding parent entry `e`.
    fn prefetch_columns(&self, e: u32, pages: *mut u8, sectors: std::ops::Range<usize>) {
        let row = self.parent_row(e, pages);
        for off in (sectors.start * 32..sectors.end * 32).step_by(64) {
            prefetch(row.wrapping_add(off));
        }
    }
}

/// Label one layer of every sector. `backend_r` / `backend_w` are the reader's and writer's
/// queues. Returns when the layer is fully written (not yet flushed).
///
/// The engine's raw-pointer accesses rely on the arguments being consistent: `bufs` must come from
/// [`Buffers::new`] with this `g` and `plan`, and `plan` from [`ThreadPlan::from_layout`] of a layout
/// that passed `Layout::validate` for `g.sectors` sectors (groups and hashers partition the sectors,
/// every group has a hasher). [`crate::run_pc1`] ensures this; this fn does not check it.
#[allow(clippy::too_many_arguments)]
pub fn run_layer(
    g: &Geometry,
    layer: u32,
    parents: &Parents,
    stripe: Stripe,
    bufs: &Buffers,
    replica_ids: &[[u8; 32]],
    hasher: LabelHasher,
    plan: &ThreadPlan,
    backend_r: &mut dyn PageBackend,
    backend_w: &mut dyn PageBackend,
    stats: &LiveStats,
    prev_in_memory: bool,
    mut on_tick: impl FnMut(u64),
) -> Result<(), SealerError> {
    let sh = LayerShared {
        g: *g,
        layer,
        parents,
        stripe,
        bufs,
        replica_ids,
        hasher,
        read_ready: Counter::new(0),
        hash_done: (0..plan.hashers()).map(|_| Counter::new(0)).collect(),
        // A group whose coordinator does not run counts as done with every chunk.
        prefetched: plan.groups.iter().map(|gp| Counter::new(if gp.prefetches() { 0 } else { g.chunks })).collect(),
        written: Counter::new(0),
        abort: AtomicBool::new(false),
        error: Mutex::new(None),
        stats,
        slow_chunk_us: std::env::var("SEALER_TEST_SLOW_CHUNK_US").ok().and_then(|s| s.parse().ok()).unwrap_or(0),
        prev_in_memory: prev_in_memory && g.keep_prev_layer && layer >= 2,
        resident: !(prev_in_memory && g.keep_prev_layer) && g.resident > 0 && layer >= 2,
    };
    stats.nodes_done.store(0, Ordering::Relaxed);
    {
        let mut b = stats.hasher_busy_ns.lock().unwrap();
        if b.len() != plan.hashers() {
            *b = vec![0; plan.hashers()];
        }
    }
    let sh = &sh;
    std::thread::scope(|s| {
        let pin = plan.pin;
        s.spawn(move || {
            if pin {
                pin_to(plan.reader);
            }
            if let Err(e) = reader(sh, backend_r) {
                sh.fail(e);
            }
        });
        s.spawn(move || {
            if pin {
                pin_to(plan.writer);
            }
            if let Err(e) = writer(sh, backend_w) {
                sh.fail(e);
            }
        });
        let mut hix = 0;
        for (gi, gp) in plan.groups.iter().enumerate() {
            let hashers = hix..hix + gp.hashers.len();
            if gp.prefetches() {
                s.spawn(move || {
                    if pin {
                        pin_to(gp.cpu);
                    }
                    let _ = coordinator(sh, gi, gp, hashers);
                });
            }
            for hp in &gp.hashers {
                let my = hix;
                hix += 1;
                s.spawn(move || {
                    if pin {
                        pin_to(hp.cpu);
                    }
                    let _ = hash_worker(sh, hp, my);
                });
            }
        }
        // Orchestrator: progress until the layer is written or failed.
        loop {
            let w = sh.written.get();
            on_tick(sh.stats.nodes_done.load(Ordering::Relaxed));
            if w >= sh.g.chunks || sh.abort.load(Ordering::Relaxed) {
                break;
            }
            let _ = sh.written.wait_at_least(w + 1, &sh.abort);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    if let Some(e) = sh.error.lock().unwrap().take() {
        return Err(e);
    }
    on_tick(g.nodes);
    Ok(())
}

fn reader(sh: &LayerShared, be: &mut dyn PageBackend) -> Result<(), SealerError> {
    let cpu0 = thread_cpu_ns();
    let r = read_parents(sh, be);
    sh.stats.reader_cpu_ns.fetch_add(thread_cpu_ns().saturating_sub(cpu0), Ordering::Relaxed);
    r
}

/// CPU time of the calling thread, nanoseconds.
fn thread_cpu_ns() -> u64 {
    // SAFETY: clock_gettime writes one timespec into the local `t`; on failure `t` stays zero.
    unsafe {
        let mut t: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }
}

fn read_parents(sh: &LayerShared, be: &mut dyn PageBackend) -> Result<(), SealerError> {
    let g = &sh.g;
    let k = g.chunk;
    let np = parents_of_layer(sh.layer);
    let mut map: HashMap<(u32, u64), u32> = HashMap::with_capacity(sh.bufs.max_pages);
    let mut ios: Vec<PageIo> = Vec::with_capacity(sh.bufs.max_pages);
    let rc = g.ring_chunks();
    if sh.resident {
        fill_resident(sh, be)?;
    }
    for c in 0..g.chunks {
        let slot = (c % g.depth) as usize;
        // slot free: every hasher and coordinator finished chunk c - depth
        if c >= g.depth {
            sh.wait_all(&sh.hash_done, c + 1 - g.depth).map_err(|_| SealerError::Aborted)?;
            sh.wait_all(&sh.prefetched, c + 1 - g.depth).map_err(|_| SealerError::Aborted)?;
        }
        // far base parents written
        if c + 1 > rc {
            sh.written.wait_at_least(c + 1 - rc, &sh.abort).map_err(|_| SealerError::Aborted)?;
        }
        // SAFETY: tables_ptr[slot] points to the k * DEGREE u32s allocated for this slot (k = g.chunk).
        // Nobody else uses the slot now: its last users (chunk c - depth), every hasher and
        // coordinator, finished that chunk (waited above). They read it again only after
        // read_ready = c + 1, which is set after the last use of `table`.
        let table = unsafe { std::slice::from_raw_parts_mut(sh.bufs.tables_ptr[slot], (k as usize) * DEGREE) };
        let pages = sh.bufs.slot_pages[slot].as_mut_ptr();
        map.clear();
        ios.clear();
        let (v0, v1) = sh.chunk_range(c);
        for v in v0.max(1)..v1 {
            let ps = sh.parents.get(v);
            let row = (v - v0) as usize * DEGREE;
            for (kk, &p) in ps.iter().enumerate().take(np) {
                let p = p as u64;
                if kk < 6 && g.in_ring(c, p) {
                    table[row + kk] = RING_FLAG | p as u32;
                    continue;
                }
                if kk >= 6 && (sh.prev_in_memory || (sh.resident && p < g.resident)) {
                    table[row + kk] = PREV_FLAG | p as u32;
                    continue;
                }
                let src_layer = if kk < 6 { sh.layer } else { sh.layer - 1 };
                let page = p / g.npp;
                let next = map.len() as u32;
                let ps_ix = *map.entry((src_layer, page)).or_insert_with(|| {
                    let (dev, offset) = sh.stripe.locate(src_layer, page);
                    // SAFETY: `next` counts the distinct pages of this chunk so far, fewer than its
                    // k * DEGREE parent entries = max_pages, the slot buffer's size in pages.
                    ios.push(PageIo { dev, offset, buf: unsafe { pages.add(next as usize * PAGE) }, len: PAGE });
                    next
                });
                table[row + kk] = ps_ix * g.npp as u32 + (p % g.npp) as u32;
            }
        }
        if !ios.is_empty() {
            if let Err(e) = be.read(&ios) {
                sh.stats.io_errors.fetch_add(1, Ordering::Relaxed);
                return Err(SealerError::Io(format!("reading parents of layer {} chunk {c}: {e}", sh.layer)));
            }
            sh.stats.pages_read.fetch_add(ios.len() as u64, Ordering::Relaxed);
        }
        sh.read_ready.set(c + 1);
    }
    Ok(())
}

/// Read nodes `[0, resident)` of the previous layer (written and flushed before this layer
/// started) into the resident buffer, sequentially. Runs in the reader before it publishes
/// chunk 0, so every coordinator sees the rows (read_ready orders them).
fn fill_resident(sh: &LayerShared, be: &mut dyn PageBackend) -> Result<(), SealerError> {
    let g = &sh.g;
    let pages = g.resident / g.npp;
    let base = sh.bufs.resident.as_mut_ptr();
    let mut ios: Vec<PageIo> = Vec::with_capacity(256);
    let mut p = 0;
    while p < pages {
        ios.clear();
        for q in p..(p + 256).min(pages) {
            let (dev, offset) = sh.stripe.locate(sh.layer - 1, q);
            // SAFETY: q < resident / npp, so q * PAGE + PAGE <= resident * row (npp * row = PAGE),
            // the resident buffer's length; nothing else touches it until read_ready is set.
            ios.push(PageIo { dev, offset, buf: unsafe { base.add(q as usize * PAGE) }, len: PAGE });
        }
        let n = ios.len() as u64;
        coalesce(&mut ios, 1 << 20);
        be.read(&ios).map_err(|e| {
            sh.stats.io_errors.fetch_add(1, Ordering::Relaxed);
            SealerError::Io(format!("reading the resident part of layer {}: {e}", sh.layer - 1))
        })?;
        sh.stats.resident_pages_read.fetch_add(n, Ordering::Relaxed);
        p += n;
    }
    Ok(())
}

/// The coordinator of an L3 group: brings the rows its hashers will read for the next chunk
/// into the caches (prefetch hints; it writes nothing), at most one chunk ahead of the slowest
/// of them so what it fetched is still cached when they get there. Hashers never wait for it;
/// a chunk they have already finished is skipped.
fn coordinator(sh: &LayerShared, gi: usize, gp: &GroupPlan, hashers: std::ops::Range<usize>) -> Result<(), Aborted> {
    let g = &sh.g;
    let np = parents_of_layer(sh.layer);
    for c in 0..g.chunks {
        sh.read_ready.wait_at_least(c + 1, &sh.abort)?;
        if c >= 2 {
            sh.wait_all(&sh.hash_done[hashers.clone()], c - 1)?;
        }
        if sh.hash_done[hashers.clone()].iter().all(|h| h.get() > c) {
            sh.prefetched[gi].set(c + 1);
            continue;
        }
        let slot = (c % g.depth) as usize;
        // SAFETY: the slot holds chunk * DEGREE u32s, written by the reader before read_ready = c + 1
        // (waited above); the reader rewrites it only after prefetched[gi] = c + 1, set after the last
        // use of `table`. Only a shared slice here.
        let table = unsafe { std::slice::from_raw_parts(sh.bufs.tables_ptr[slot], (g.chunk as usize) * DEGREE) };
        let pages = sh.bufs.slot_pages[slot].as_mut_ptr();
        let (v0, v1) = sh.chunk_range(c);
        for v in v0.max(1)..v1 {
            let vi = (v - v0) as usize;
            for &e in &table[vi * DEGREE..vi * DEGREE + np] {
                // Ring rows of this chunk and the last are being written: they are in cache anyway.
                if e & RING_FLAG != 0 && (e & !RING_FLAG) as u64 + 2 * g.chunk >= v0 {
                    continue;
                }
                sh.prefetch_columns(e, pages, gp.first..gp.first + gp.count);
            }
        }
        sh.prefetched[gi].set(c + 1);
    }
    Ok(())
}

/// Nodes ahead whose parents a hasher prefetches.
const PREFETCH_AHEAD: u64 = 4;

/// Hint the CPU to fetch the cache line holding `p` (no effect on memory, never faults).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint: it reads no bytes architecturally and never faults, whatever `p`.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T1)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A hasher: labels its sectors' columns of every node, reading each parent where it lies
/// (node cache, previous layer in memory, or the read slot's pages), with no copy.
fn hash_worker(sh: &LayerShared, hp: &HasherPlan, my: usize) -> Result<(), Aborted> {
    let g = &sh.g;
    let layer = sh.layer;
    let np = parents_of_layer(layer);
    let rc = g.ring_chunks();
    let mut busy = 0u64;
    for c in 0..g.chunks {
        sh.read_ready.wait_at_least(c + 1, &sh.abort)?;
        if c + 1 > rc {
            // the ring rows this chunk overwrites must be on storage
            sh.written.wait_at_least(c + 1 - rc, &sh.abort)?;
        }
        let t0 = Instant::now();
        let slot = (c % g.depth) as usize;
        // SAFETY: the slot holds chunk * DEGREE u32s, written by the reader before read_ready = c + 1
        // (waited above); the reader rewrites it only after this hasher sets hash_done to c + 1, after
        // the last use of `table`. Only shared slices here.
        let table = unsafe { std::slice::from_raw_parts(sh.bufs.tables_ptr[slot], (g.chunk as usize) * DEGREE) };
        let pages = sh.bufs.slot_pages[slot].as_mut_ptr();
        let (v0, v1) = sh.chunk_range(c);
        for v in v0..v1 {
            let vi = (v - v0) as usize;
            // Ask for the parents of a node a few steps ahead: expander rows are random over
            // the previous layer (DRAM, and a TLB miss on ordinary pages), and hashing the
            // nodes in between hides most of that latency.
            if v + PREFETCH_AHEAD < v1 {
                let ahead = vi + PREFETCH_AHEAD as usize;
                for &e in &table[ahead * DEGREE..ahead * DEGREE + np] {
                    sh.prefetch_columns(e, pages, hp.first..hp.first + hp.count);
                }
            }
            let mut rows = [std::ptr::null(); DEGREE];
            if v > 0 {
                for (r, &e) in rows.iter_mut().zip(&table[vi * DEGREE..vi * DEGREE + np]) {
                    *r = sh.parent_row(e, pages);
                }
            }
            // SAFETY: for each of this hasher's sectors s (< sectors, so s * 32 + 32 <= row) the
            // parent bytes rows[k] + 32 s lie in a whole row: a ring row (in the ring while this
            // chunk runs: in_ring held when the reader made the entry, and its chunk is not
            // overwritten before written >= c + 1 - rc, waited above), a row of the previous layer in
            // memory (finished last layer), or a page of this slot (filled before read_ready, not
            // reused before hash_done = c + 1). Only this thread writes columns s of any ring row, so
            // the ring parents it reads were finished by it, and out_row + 32 s (node v's row,
            // column s) overlaps no parent (a node is never its own parent); the writer reads the
            // row only after hash_done = c + 1. rids holds every sector's id.
            unsafe {
                sh.hasher.label_rows(layer, v, &rows, sh.replica_ids, hp.first..hp.first + hp.count, sh.ring_ptr(v))
            };
        }
        busy += t0.elapsed().as_nanos() as u64;
        sh.hash_done[my].set(c + 1);
        if c % 64 == 63 || c + 1 == g.chunks {
            if let Ok(mut b) = sh.stats.hasher_busy_ns.lock() {
                b[my] += busy;
            }
            busy = 0;
        }
    }
    Ok(())
}

fn writer(sh: &LayerShared, be: &mut dyn PageBackend) -> Result<(), SealerError> {
    let g = &sh.g;
    let mut ios: Vec<PageIo> = Vec::new();
    for c in 0..g.chunks {
        sh.wait_all(&sh.hash_done, c + 1).map_err(|_| SealerError::Aborted)?;
        let (v0, v1) = sh.chunk_range(c);
        let p0 = v0 / g.npp;
        let p1 = v1.div_ceil(g.npp);
        ios.clear();
        for p in p0..p1 {
            let (dev, offset) = sh.stripe.locate(sh.layer, p);
            ios.push(PageIo { dev, offset, buf: sh.ring_ptr(p * g.npp), len: PAGE });
        }
        coalesce(&mut ios, 1 << 20);
        if let Err(e) = be.write(&ios) {
            sh.stats.io_errors.fetch_add(1, Ordering::Relaxed);
            return Err(SealerError::Io(format!("writing layer {} chunk {c}: {e}", sh.layer)));
        }
        sh.stats.pages_written.fetch_add(p1 - p0, Ordering::Relaxed);
        if sh.slow_chunk_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(sh.slow_chunk_us));
        }
        sh.stats.nodes_done.store(v1, Ordering::Relaxed);
        sh.written.set(c + 1);
    }
    Ok(())
}
