//! Page-aligned, zero-initialised buffers for O_DIRECT I/O: from the heap, or carved from
//! 1 GiB hugepages ([`HugeArena`]).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A zeroed buffer aligned to 4 KiB (rounded up to whole pages).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    cap: usize,
    /// The hugepage mapping the buffer lives in (None: a heap allocation this buffer frees).
    arena: Option<Arc<HugeRegion>>,
    /// What owns the bytes when another library allocated them ([`AlignedBuf::from_owner`]).
    owner: Option<Box<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: AlignedBuf uniquely owns its bytes (like a Box<[u8]>): `ptr` is not shared with any
// other value (heap buffers are freed only by Drop; arena buffers are disjoint ranges of a
// mapping kept alive by the Arc), so moving it to another thread is fine.
unsafe impl Send for AlignedBuf {}
// SAFETY: through `&self` the type itself only reads (`as_slice`) or hands out the raw pointer;
// any write through `as_mut_ptr()` is the responsibility of the code that does it (see PageIo).
unsafe impl Sync for AlignedBuf {}

fn page_cap(len: usize) -> usize {
    len.max(1).div_ceil(crate::PAGE).checked_mul(crate::PAGE).expect("buffer size overflows usize")
}

impl AlignedBuf {
    /// Allocate `len` zeroed bytes (capacity rounded up to 4 KiB) on the heap.
    pub fn new(len: usize) -> Self {
        let cap = page_cap(len);
        let layout = Layout::from_size_align(cap, crate::PAGE).expect("layout");
        // SAFETY: `layout` has a power-of-two alignment and a non-zero size: cap >= PAGE because
        // len.max(1) is rounded up to whole pages, with the multiplication checked.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {cap} bytes");
        AlignedBuf { ptr, len, cap, arena: None, owner: None }
    }
    /// `len` bytes at `ptr` that `owner` allocated and frees when the buffer drops it: memory
    /// of another library, such as a GPU driver's page-locked host buffers.
    ///
    /// # Safety
    /// `ptr` is aligned to 4 KiB and points to at least `len` initialised bytes that stay
    /// valid, and are used through nothing else, for as long as `owner` lives.
    pub unsafe fn from_owner(ptr: *mut u8, len: usize, owner: Box<dyn std::any::Any + Send + Sync>) -> Self {
        assert_eq!(ptr as usize % crate::PAGE, 0, "from_owner needs page-aligned memory");
        AlignedBuf { ptr, len, cap: len, arena: None, owner: Some(owner) }
    }

    /// `len` zeroed bytes from `arena` when it has room, else from the heap.
    pub fn new_in(arena: Option<&HugeArena>, len: usize) -> Self {
        arena.and_then(|a| a.alloc(len)).unwrap_or_else(|| AlignedBuf::new(len))
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// True when the buffer lives on 1 GiB hugepages.
    pub fn on_hugepages(&self) -> bool {
        self.arena.is_some()
    }
    /// Raw pointer.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Immutable view.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr (non-null, checked in new() / alloc()) points to cap >= len initialised (zeroed)
        // bytes owned by self, and the slice borrows self, so the memory outlives it. Nothing may
        // write through as_mut_ptr() while the slice lives: a rule for users of that raw pointer.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    /// Mutable view.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice; `&mut self` guarantees no other safe borrow of the buffer exists.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.arena.is_some() || self.owner.is_some() {
            return; // the mapping goes when its last buffer and the arena are gone; an owner frees its own
        }
        // SAFETY: ptr was returned by alloc_zeroed in new() with this same layout (cap, PAGE), and
        // Drop runs once, so it is freed exactly once.
        unsafe { dealloc(self.ptr, Layout::from_size_align(self.cap, crate::PAGE).unwrap()) }
    }
}

/// One anonymous mapping of 1 GiB hugepages.
struct HugeRegion {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the region is plain memory; which bytes each thread touches is decided by the
// AlignedBufs carved from it (disjoint ranges), as for heap buffers.
unsafe impl Send for HugeRegion {}
// SAFETY: as above; the region itself is never written through `&self`.
unsafe impl Sync for HugeRegion {}

impl Drop for HugeRegion {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned in HugeArena::map, unmapped once here.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// 1 GiB hugepages mapped once (`MAP_HUGETLB`, 1 GiB page size, pre-faulted), from which the
/// run's large buffers are carved: the pages its pod was given (`hugepages-1Gi`) instead of
/// ordinary 4 KiB pages and their TLB misses.
pub struct HugeArena {
    region: Arc<HugeRegion>,
    next: AtomicUsize,
}

/// Bytes in one 1 GiB hugepage.
pub const HUGEPAGE: usize = 1 << 30;

impl HugeArena {
    /// Map `pages` 1 GiB hugepages. Fails (ENOMEM) when the node's pool has fewer free.
    pub fn map(pages: usize) -> std::io::Result<HugeArena> {
        let len = pages.checked_mul(HUGEPAGE).filter(|&l| l > 0).ok_or(std::io::ErrorKind::InvalidInput)?;
        // MAP_HUGE_1GB: log2(1 GiB) = 30 in the MAP_HUGE_SHIFT bits.
        let flags = libc::MAP_PRIVATE
            | libc::MAP_ANONYMOUS
            | libc::MAP_HUGETLB
            | libc::MAP_POPULATE
            | (30 << libc::MAP_HUGE_SHIFT);
        // SAFETY: an anonymous mapping at an address of the kernel's choice touches no existing
        // memory; the result is checked against MAP_FAILED before use.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(HugeArena { region: Arc::new(HugeRegion { ptr: ptr.cast(), len }), next: AtomicUsize::new(0) })
    }

    /// A zeroed 4 KiB-aligned buffer of `len` bytes from the mapping, or None when it is full.
    pub fn alloc(&self, len: usize) -> Option<AlignedBuf> {
        let cap = page_cap(len);
        let start = self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                n.checked_add(cap).filter(|&end| end <= self.region.len)
            })
            .ok()?;
        // SAFETY: start + cap <= region.len (checked above), so the pointer stays in the mapping;
        // each range is handed out once (the bump pointer only grows). Fresh hugetlb pages are
        // zeroed by the kernel and no range is reused, so the buffer starts zeroed.
        let ptr = unsafe { self.region.ptr.add(start) };
        Some(AlignedBuf { ptr, len, cap, arena: Some(self.region.clone()), owner: None })
    }

    /// Bytes mapped.
    pub fn mapped(&self) -> usize {
        self.region.len
    }

    /// Bytes handed out.
    pub fn used(&self) -> usize {
        self.next.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Free 1 GiB hugepages on this machine.
    fn free_1g() -> usize {
        std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn arena_carves_disjoint_zeroed_buffers_and_falls_back_when_full() {
        let Ok(arena) = HugeArena::map(1) else {
            // No free 1 GiB page (the sealer crate's CLI test reserves one when it can).
            assert_eq!(free_1g(), 0, "a free 1 GiB page exists but could not be mapped");
            eprintln!("no free 1 GiB hugepage: arena not exercised");
            return;
        };
        let mut a = AlignedBuf::new_in(Some(&arena), 3 * crate::PAGE + 1);
        let b = AlignedBuf::new_in(Some(&arena), HUGEPAGE / 2);
        assert!(a.on_hugepages() && b.on_hugepages());
        assert_eq!(b.as_mut_ptr() as usize - a.as_mut_ptr() as usize, 4 * crate::PAGE);
        assert!(a.as_slice().iter().all(|&x| x == 0) && b.as_slice().iter().all(|&x| x == 0));
        a.as_mut_slice().fill(7);
        assert!(b.as_slice()[..8].iter().all(|&x| x == 0));
        // Full: the next buffer comes from the heap.
        let c = AlignedBuf::new_in(Some(&arena), HUGEPAGE / 2);
        assert!(!c.on_hugepages());
        assert_eq!(arena.used(), 4 * crate::PAGE + HUGEPAGE / 2);
        drop(arena); // buffers keep the mapping alive
        assert_eq!(a.as_slice()[0], 7);
    }
}
