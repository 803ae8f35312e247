//! Large requests: pages that lie next to each other on one device, read or written by one
//! request whatever their places in memory (a vectored transfer).
//!
//! The stripe puts page `p` of a layer on device `p mod D`, so with several devices the pages
//! of a range that are adjacent on a device are `D` pages apart in memory. One request per
//! device-contiguous run, with one memory segment per place (adjacent places merged), keeps the
//! request count at `bytes / cap` instead of `bytes / 4096`.

use crate::{Stripe, PAGE};

/// The most segments one vectored request carries (Linux' `UIO_MAXIOV`).
pub const MAX_SEGMENTS: usize = 1024;

/// The request size reads and writes are capped at when nobody picks one: `sealer bench
/// pc2-io` measures 1 MiB requests within a few per cent of fio's best on tmpfs and on disk.
pub const DEFAULT_REQUEST_BYTES: usize = 1 << 20;

/// The smallest cap a caller may pick: below it the request rate, not the device, bounds a
/// sequential read (4 KiB requests stop near 1 GB/s even from memory).
pub const MIN_REQUEST_BYTES: usize = 256 << 10;

/// One request: `len()` bytes at byte `offset` of device `dev`, to or from `segs` in order.
#[derive(Clone, Debug)]
pub struct Extent {
    /// Device index in [`crate::Devices`].
    pub dev: usize,
    /// Byte offset on the device (a multiple of 4096).
    pub offset: u64,
    /// Memory, in device order: each segment 4 KiB aligned, a multiple of 4096 bytes long.
    pub segs: Vec<libc::iovec>,
}

// SAFETY: an Extent is plain data and never dereferences its segments itself; as with
// [`crate::PageIo`], that the memory is valid for the transfer is a contract on whoever builds
// it and hands it to a backend, on whatever thread.
unsafe impl Send for Extent {}
// SAFETY: as above: shared references only read the addresses, never the memory.
unsafe impl Sync for Extent {}

impl Extent {
    /// Bytes the request moves.
    pub fn len(&self) -> usize {
        self.segs.iter().map(|s| s.iov_len).sum()
    }

    /// True when it moves nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The request as page transfers (one per segment): what a backend without vectored
    /// transfers runs.
    pub fn pages(&self) -> impl Iterator<Item = crate::PageIo> + '_ {
        let mut offset = self.offset;
        self.segs.iter().map(move |s| {
            let io = crate::PageIo { dev: self.dev, offset, buf: s.iov_base as *mut u8, len: s.iov_len };
            offset += s.iov_len as u64;
            io
        })
    }
}

/// The requests that move `pages` of `layer` (each page number with the 4 KiB of memory it
/// goes to or comes from), each at most `max_bytes` (rounded down to whole pages, at least
/// one page) and [`MAX_SEGMENTS`] segments. A request never crosses devices; pages adjacent
/// on a device join one request whatever their order in `pages`. Requests come out by
/// device, then by offset.
pub fn plan(
    stripe: &Stripe,
    layer: u32,
    pages: impl IntoIterator<Item = (u64, *mut u8)>,
    max_bytes: usize,
) -> Vec<Extent> {
    let cap = (max_bytes / PAGE).max(1) * PAGE;
    let mut located: Vec<(usize, u64, usize)> = pages
        .into_iter()
        .map(|(p, buf)| {
            let (dev, off) = stripe.locate(layer, p);
            (dev, off, buf as usize)
        })
        .collect();
    // A range comes in order per device already: the sort is then one linear pass.
    located.sort_by_key(|&(dev, off, _)| (dev, off));
    let mut out: Vec<Extent> = Vec::new();
    let mut len = 0usize;
    for (dev, off, buf) in located {
        if let Some(last) = out.last_mut() {
            let seg = last.segs.last_mut().expect("an extent has a segment");
            let joins = last.dev == dev && last.offset + len as u64 == off && len + PAGE <= cap;
            if joins && seg.iov_base as usize + seg.iov_len == buf {
                seg.iov_len += PAGE;
                len += PAGE;
                continue;
            }
            if joins && last.segs.len() < MAX_SEGMENTS {
                last.segs.push(libc::iovec { iov_base: buf as *mut libc::c_void, iov_len: PAGE });
                len += PAGE;
                continue;
            }
        }
        out.push(Extent {
            dev,
            offset: off,
            segs: vec![libc::iovec { iov_base: buf as *mut libc::c_void, iov_len: PAGE }],
        });
        len = PAGE;
    }
    out
}

/// The requests that move pages `[p0, p0 + count)` of `layer`, page `p0 + i` at `base + i ×
/// 4096`: a range read into (or written from) one buffer.
pub fn plan_range(stripe: &Stripe, layer: u32, p0: u64, count: usize, base: *mut u8, max_bytes: usize) -> Vec<Extent> {
    // wrapping_add: only addresses are computed here; the caller's buffer holds count pages.
    plan(stripe, layer, (0..count).map(|i| (p0 + i as u64, base.wrapping_add(i * PAGE))), max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Every page is moved exactly once into its place, no request crosses a device or
    /// its device's run, none is larger than the cap or has too many segments.
    fn check(stripe: &Stripe, layer: u32, pages: &[u64], cap: usize) -> usize {
        let base = 1usize << 40; // addresses only: nothing is dereferenced
        let list: Vec<(u64, *mut u8)> =
            pages.iter().enumerate().map(|(i, &p)| (p, (base + i * PAGE) as *mut u8)).collect();
        let ext = plan(stripe, layer, list.iter().copied(), cap);
        let mut seen = std::collections::HashMap::new();
        for e in &ext {
            assert!(e.len() <= cap.max(PAGE), "request of {} bytes over the cap {cap}", e.len());
            assert!(e.segs.len() <= MAX_SEGMENTS);
            let mut off = e.offset;
            for s in &e.segs {
                assert_eq!(s.iov_len % PAGE, 0);
                for k in 0..s.iov_len / PAGE {
                    let mem = s.iov_base as usize + k * PAGE;
                    assert!(seen.insert(mem, (e.dev, off)).is_none(), "memory page {mem:#x} moved twice");
                    off += PAGE as u64;
                }
            }
        }
        assert_eq!(seen.len(), pages.len(), "every page moved");
        for (i, &p) in pages.iter().enumerate() {
            assert_eq!(seen[&(base + i * PAGE)], stripe.locate(layer, p), "page {p} goes to its place");
        }
        ext.len()
    }

    #[test]
    fn the_planner_moves_every_page_once_within_a_device_and_the_cap() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(51);
        for _ in 0..300 {
            let devices = rng.gen_range(1..=5);
            let ppl = rng.gen_range(1..=3000u64);
            let stripe = Stripe::new(devices, rng.gen_range(0..100), ppl);
            let layer = rng.gen_range(1..=11);
            let cap = rng.gen_range(1..=64) * PAGE + rng.gen_range(0..PAGE);
            let pages: Vec<u64> = if rng.gen_bool(0.5) {
                let p0 = rng.gen_range(0..ppl);
                (p0..rng.gen_range(p0 + 1..=ppl)).collect()
            } else {
                let mut v: Vec<u64> = (0..rng.gen_range(1..200)).map(|_| rng.gen_range(0..ppl)).collect();
                v.sort_unstable();
                v.dedup();
                // any order
                for i in (1..v.len()).rev() {
                    v.swap(i, rng.gen_range(0..=i));
                }
                v
            };
            check(&stripe, layer, &pages, cap);
        }
    }

    #[test]
    fn a_range_on_one_device_is_few_large_requests() {
        let stripe = Stripe::new(1, 7, 1 << 12);
        let pages: Vec<u64> = (0..1 << 12).collect();
        assert_eq!(check(&stripe, 3, &pages, 1 << 20), 16, "16 MiB in 1 MiB requests");
        let ext = plan_range(&stripe, 3, 0, 256, (1usize << 40) as *mut u8, 1 << 20);
        assert_eq!((ext.len(), ext[0].segs.len()), (1, 1), "one contiguous segment");
    }

    #[test]
    fn a_striped_range_is_one_request_per_device_and_cap() {
        let stripe = Stripe::new(4, 0, 1 << 12);
        let pages: Vec<u64> = (0..1024).collect();
        // 256 pages per device, 64 per 256 KiB request.
        assert_eq!(check(&stripe, 1, &pages, 256 << 10), 16);
        // A cap beyond the segment limit: 1024 segments of a page each.
        let pages: Vec<u64> = (0..1 << 12).collect();
        assert_eq!(check(&stripe, 1, &pages, 64 << 20), 4);
    }
}
