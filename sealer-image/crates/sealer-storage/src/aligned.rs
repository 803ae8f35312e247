//! Page-aligned, zero-initialised heap buffers for O_DIRECT I/O.

use std::alloc::{alloc_zeroed, dealloc, Layout};

/// A zeroed buffer aligned to 4 KiB (rounded up to whole pages).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    cap: usize,
}

unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocate `len` zeroed bytes (capacity rounded up to 4 KiB).
    pub fn new(len: usize) -> Self {
        let cap = len.max(1).div_ceil(crate::PAGE) * crate::PAGE;
        let layout = Layout::from_size_align(cap, crate::PAGE).expect("layout");
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
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    /// Mutable view.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        unsafe { dealloc(self.ptr, Layout::from_size_align(self.cap, crate::PAGE).unwrap()) }
    }
}
