//! The node's 1 GiB hugepages: how many the pool has free, and whether this process can map
//! and fault some (a hugetlb cgroup limit or a pool emptied by others shows here, not in the
//! free count).

use sealer_storage::{HugeArena, HUGEPAGE};
use serde::Serialize;

/// Where the kernel counts the free 1 GiB pages.
pub const FREE_FILE: &str = "/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages";

/// The hugepages entry of the document.
#[derive(Clone, Debug, Serialize)]
pub struct Hugepages {
    /// Free 1 GiB pages in the node's pool (0 where the kernel has no such pool).
    pub free: usize,
    /// Pages the probe tried: the probe asked for, at most `free`.
    pub probed: usize,
    /// Pages mapped and faulted, all held at once.
    pub mapped: usize,
    /// Why a page could not be mapped or faulted, or null.
    pub error: Option<String>,
}

/// Free 1 GiB pages now (0 when the kernel does not say).
pub fn free() -> usize {
    std::fs::read_to_string(FREE_FILE).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// Map up to `want` 1 GiB pages (never more than are free), one mapping each, pre-faulted
/// (`MAP_POPULATE`, then `MADV_POPULATE_WRITE`, which reports a page the kernel cannot give
/// instead of a SIGBUS on first touch), write one byte in every 4 KiB of each, and give them
/// all back.
pub fn probe(want: usize) -> Hugepages {
    let free = free();
    let probed = want.min(free);
    let mut held = Vec::with_capacity(probed);
    let mut error = None;
    for i in 0..probed {
        match map_one() {
            Ok(page) => held.push(page),
            Err(e) => {
                error = Some(format!("mapping 1 GiB hugepage {} of {probed}: {e}", i + 1));
                break;
            }
        }
    }
    Hugepages { free, probed, mapped: held.len(), error }
}

/// One 1 GiB page mapped, faulted and written (unmapped when the arena drops).
fn map_one() -> std::io::Result<HugeArena> {
    let arena = HugeArena::map(1)?;
    let buf = arena.alloc(HUGEPAGE).expect("a fresh 1 GiB arena holds 1 GiB");
    let p = buf.as_mut_ptr();
    // SAFETY: (p, HUGEPAGE) is the whole mapping, owned by `arena`; madvise reads no memory.
    let r = unsafe { libc::madvise(p.cast(), HUGEPAGE, libc::MADV_POPULATE_WRITE) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        // EINVAL: a kernel before 5.14 without the advice; MAP_POPULATE did the faulting.
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(std::io::Error::new(e.kind(), format!("faulting it in: {e}")));
        }
    }
    for off in (0..HUGEPAGE).step_by(4096) {
        // SAFETY: off < HUGEPAGE, inside the writable mapping; volatile so the writes happen.
        unsafe { p.add(off).write_volatile(1) };
    }
    Ok(arena)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_nothing_maps_nothing() {
        let h = probe(0);
        assert_eq!((h.probed, h.mapped, h.error), (0, 0, None));
    }

    /// Where the pool has a free page, one maps; elsewhere nothing is tried and nothing fails.
    #[test]
    fn probe_maps_what_is_free() {
        let h = probe(1);
        assert!(h.probed <= h.free.min(1));
        // Another process may take the page between the count and the map: then the error says so.
        assert!(h.mapped == h.probed || h.error.is_some(), "{h:?}");
    }
}
