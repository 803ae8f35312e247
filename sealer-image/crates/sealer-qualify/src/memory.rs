//! Memory bandwidth as PC1's buffers see it: threads copying one large buffer into another.

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Bytes of each thread's source and destination buffers: far beyond any cache.
pub const COPY_BYTES: usize = 64 << 20;

/// Copy bandwidth: `threads` threads (at least 1) each copy a 64 MiB buffer into another,
/// over and over, for `seconds`, starting together. Bytes copied per second, summed over the
/// threads; every byte copied is one read and one write of memory.
pub fn copy_bandwidth(threads: usize, seconds: f64) -> f64 {
    let threads = threads.max(1);
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let src = vec![0x5au8; COPY_BYTES];
                    let mut dst = vec![0u8; COPY_BYTES];
                    dst.fill(1); // fault the pages in before the clock starts
                    start.wait();
                    let t0 = Instant::now();
                    let mut copies = 0u64;
                    while t0.elapsed() < Duration::from_secs_f64(seconds) {
                        dst.copy_from_slice(std::hint::black_box(&src));
                        std::hint::black_box(&mut dst);
                        copies += 1;
                    }
                    (copies * COPY_BYTES as u64) as f64 / t0.elapsed().as_secs_f64()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("copy thread")).sum()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn copy_bandwidth_is_positive() {
        assert!(super::copy_bandwidth(2, 0.1) > 1e8);
    }
}
