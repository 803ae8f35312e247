//! How fast one thread can label: the bound the PC1 engine can reach on this CPU, measured
//! with the engine's own call on parents in memory (no I/O, no parent lookup).

use crate::{Kernel, LabelHasher, DEGREE};
use std::time::{Duration, Instant};

/// Sector-labels per second of one thread hashing `streams` sectors per kernel call (1, 2 or
/// 3, as [`LabelHasher::label_rows`] groups them) with `kernel`, for about `secs` seconds:
/// the rate `sealer bench pc1` reports as the SHA bound and `sealer qualify` as the node's
/// hashing rate.
///
/// Panics when asked for SHA-NI on a CPU without it (take the kernel from [`Kernel::select`]).
pub fn bound_rate(kernel: Kernel, streams: usize, secs: f64) -> f64 {
    assert!(streams >= 1, "at least one stream");
    assert!(kernel != Kernel::ShaNi || Kernel::sha_ni_available(), "SHA-NI asked for on a CPU without it");
    let h = LabelHasher::new(kernel);
    let rids: Vec<[u8; 32]> = (0..streams).map(|s| [7 + s as u8; 32]).collect();
    // 14 parent rows of `streams` sectors, and an output row.
    let store: Vec<u8> = (0..DEGREE * streams * 32).map(|i| (i * 31 % 251) as u8).collect();
    let rows: [*const u8; DEGREE] = std::array::from_fn(|k| store[k * streams * 32..].as_ptr());
    let mut out = vec![0u8; streams * 32];
    let t0 = Instant::now();
    let mut n = 0u64;
    let mut node = 1u64;
    while t0.elapsed() < Duration::from_secs_f64(secs) {
        for _ in 0..1000 {
            // SAFETY: rows[k] + 32 s for s < streams lies in `store` (k * streams * 32 + 32 s + 32 <=
            // DEGREE * streams * 32), out + 32 s in `out`; `out` and `store` are distinct; rids holds
            // `streams` ids; SHA-NI is only used where the CPU has it (asserted above).
            unsafe { h.label_rows(2, node, &rows, &rids, 0..streams, out.as_mut_ptr()) };
            n += streams as u64;
            node += 1;
        }
    }
    std::hint::black_box(&out);
    n as f64 / t0.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short measurement is positive on the portable kernel and, where the CPU has it, SHA-NI
    /// (which is the faster of the two).
    #[test]
    fn bound_rate_is_positive_and_sha_ni_is_faster() {
        let portable = bound_rate(Kernel::Portable, 2, 0.05);
        assert!(portable > 0.0);
        if Kernel::sha_ni_available() {
            let ni = bound_rate(Kernel::ShaNi, 2, 0.05);
            assert!(ni > portable, "sha-ni {ni} vs portable {portable}");
        }
    }
}
