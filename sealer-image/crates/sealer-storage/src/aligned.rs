//! Page-aligned, zero-initialised heap buffers for O_DIRECT I/O.

use std::alloc::{alloc_zeroed, dealloc, Layout};

/// A zeroed buffer aligned to 4 KiB (rounded up to whole pages).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    cap: usize,
}

// SAFETY: AlignedBuf uniquely owns its allocation (like a Box<[u8]>): `ptr` is not shared with any
// other value and is freed only by Drop, so moving it to another thread is fine.
unsafe impl Send for AlignedBuf {}
// SAFETY: through `&self` the type itself only reads (`as_slice`) or hands out the raw pointer;
// any write through `as_mut_ptr()` is the responsibility of the code that does it (see PageIo).
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocate `len` zeroed bytes (capacity rounded up to 4 KiB).
    pub fn new(len: usize) -> Self {
        let cap = len.max(1).div_ceil(crate::PAGE).checked_mul(crate::PAGE).expect("buffer size overflows usize");
        let layout = Layout::from_size_align(cap, crate::PAGE).expect("layout");
        // SAFETY: `layout` has a power-of-two alignment and a non-zero size: cap >= PAGE because
        // len.max(1) is rounded up to whole pages, with the multiplication checked.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {cap} bytes");
        AlignedBuf { ptr, len, cap }
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Raw pointer.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Immutable view.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr (non-null, checked in new()) points to cap >= len initialised (zeroed) bytes owned
        // by self, and the slice borrows self, so the allocation outlives it. Nothing may write through
        // as_mut_ptr() while the slice lives: a rule for users of that raw pointer, not enforced here.
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
        // SAFETY: ptr was returned by alloc_zeroed in new() with this same layout (cap, PAGE), and
        // Drop runs once, so it is freed exactly once.
        unsafe { dealloc(self.ptr, Layout::from_size_align(self.cap, crate::PAGE).unwrap()) }
    }
}
