//! SHA-256 compression with the x86 SHA extensions: one or several independent streams,
//! interleaved instruction by instruction so the CPU overlaps their `sha256rnds2` chains.
#![cfg(target_arch = "x86_64")]
#![allow(clippy::missing_safety_doc)]

use core::arch::x86_64::*;

#[rustfmt::skip]
static K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// The four round constants of group `i`.
///
/// # Safety
/// `i < 16`, so that `K[4 * i..4 * i + 4]` is inside `K`. Uses only SSE2, which every x86_64 CPU has.
#[inline(always)]
unsafe fn kv(i: usize) -> __m128i {
    _mm_loadu_si128(K.as_ptr().add(i * 4) as *const __m128i)
}

/// Shuffle mask that byte-swaps each 32-bit lane.
///
/// # Safety
/// No requirement beyond running on x86_64: it uses only SSE2, which every x86_64 CPU has.
#[inline(always)]
unsafe fn bswap_mask() -> __m128i {
    _mm_set_epi64x(0x0c0d_0e0f_0809_0a0bu64 as i64, 0x0405_0607_0001_0203u64 as i64)
}

/// Load the state as (ABEF, CDGH) register pair.
///
/// # Safety
/// The CPU must support SSSE3 and SSE4.1 (`palignr`, `pblendw`).
#[inline(always)]
unsafe fn load_state(state: &[u32; 8]) -> (__m128i, __m128i) {
    let p = state.as_ptr() as *const __m128i;
    let dcba = _mm_loadu_si128(p);
    let hgfe = _mm_loadu_si128(p.add(1));
    let cdab = _mm_shuffle_epi32(dcba, 0xB1);
    let efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    let abef = _mm_alignr_epi8(cdab, efgh, 8);
    let cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    (abef, cdgh)
}

/// Store an (ABEF, CDGH) register pair back as the state words A..H.
///
/// # Safety
/// The CPU must support SSSE3 and SSE4.1 (`palignr`, `pblendw`).
#[inline(always)]
unsafe fn store_state(state: &mut [u32; 8], abef: __m128i, cdgh: __m128i) {
    let feba = _mm_shuffle_epi32(abef, 0x1B);
    let dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    let dcba = _mm_blend_epi16(feba, dchg, 0xF0);
    let hgef = _mm_alignr_epi8(dchg, feba, 8);
    let p = state.as_mut_ptr() as *mut __m128i;
    _mm_storeu_si128(p, dcba);
    _mm_storeu_si128(p.add(1), hgef);
}

/// Next four message words from the previous sixteen.
///
/// # Safety
/// The CPU must support the SHA extensions and SSSE3.
#[inline(always)]
unsafe fn sched(w0: __m128i, w1: __m128i, w2: __m128i, w3: __m128i) -> __m128i {
    let t1 = _mm_sha256msg1_epu32(w0, w1);
    let t2 = _mm_alignr_epi8(w3, w2, 4);
    _mm_sha256msg2_epu32(_mm_add_epi32(t1, t2), w3)
}

/// Four rounds with message words `w` and constants of group `i`.
///
/// # Safety
/// The CPU must support the SHA extensions, and `i < 16` (see [`kv`]).
#[inline(always)]
unsafe fn rounds4(abef: &mut __m128i, cdgh: &mut __m128i, w: __m128i, i: usize) {
    let t = _mm_add_epi32(w, kv(i));
    *cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, t);
    let t2 = _mm_shuffle_epi32(t, 0x0E);
    *abef = _mm_sha256rnds2_epu32(*abef, *cdgh, t2);
}

/// The 64 rounds of one block for `S` independent streams, fully unrolled so the message
/// words stay in registers; the streams' instructions are interleaved group by group.
///
/// # Safety
/// The CPU must support the SHA extensions and SSSE3.
#[inline(always)]
unsafe fn block_rounds<const S: usize>(abef: &mut [__m128i; S], cdgh: &mut [__m128i; S], w: &mut [[__m128i; 4]; S]) {
    macro_rules! plain {
        ($i:expr) => {
            for s in 0..S {
                rounds4(&mut abef[s], &mut cdgh[s], w[s][$i], $i);
            }
        };
    }
    macro_rules! sched_step {
        ($i:expr, $a:expr, $b:expr, $c:expr, $d:expr) => {
            for s in 0..S {
                w[s][$a] = sched(w[s][$a], w[s][$b], w[s][$c], w[s][$d]);
                rounds4(&mut abef[s], &mut cdgh[s], w[s][$a], $i);
            }
        };
    }
    plain!(0);
    plain!(1);
    plain!(2);
    plain!(3);
    sched_step!(4, 0, 1, 2, 3);
    sched_step!(5, 1, 2, 3, 0);
    sched_step!(6, 2, 3, 0, 1);
    sched_step!(7, 3, 0, 1, 2);
    sched_step!(8, 0, 1, 2, 3);
    sched_step!(9, 1, 2, 3, 0);
    sched_step!(10, 2, 3, 0, 1);
    sched_step!(11, 3, 0, 1, 2);
    sched_step!(12, 0, 1, 2, 3);
    sched_step!(13, 1, 2, 3, 0);
    sched_step!(14, 2, 3, 0, 1);
    sched_step!(15, 3, 0, 1, 2);
}

/// Load one 64-byte block given as two 32-byte halves, as four byte-swapped message vectors.
///
/// # Safety
/// `lo` and `hi` must each be valid for 32 bytes of reads (no alignment needed), and the CPU must
/// support SSSE3.
#[inline(always)]
unsafe fn load_halves(lo: *const u8, hi: *const u8, mask: __m128i) -> [__m128i; 4] {
    let (lo, hi) = (lo as *const __m128i, hi as *const __m128i);
    [
        _mm_shuffle_epi8(_mm_loadu_si128(lo), mask),
        _mm_shuffle_epi8(_mm_loadu_si128(lo.add(1)), mask),
        _mm_shuffle_epi8(_mm_loadu_si128(hi), mask),
        _mm_shuffle_epi8(_mm_loadu_si128(hi.add(1)), mask),
    ]
}

/// `S` independent streams of `H / 2` blocks each, interleaved instruction by instruction.
/// Block `j` of stream `s` is the 32 bytes at `halves[s][2j]` followed by the 32 bytes at
/// `halves[s][2j + 1]`, so a message can be hashed where its pieces lie, without copying it.
///
/// # Safety
/// The CPU must support SHA, SSE2, SSSE3 and SSE4.1 (what `Kernel::sha_ni_available` checks), and
/// every pointer in `halves` must be valid for 32 bytes of reads.
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
pub unsafe fn compress_halves<const S: usize, const H: usize>(
    states: &mut [[u32; 8]; S],
    halves: &[[*const u8; H]; S],
) {
    let mask = bswap_mask();
    let mut abef = [_mm_setzero_si128(); S];
    let mut cdgh = [_mm_setzero_si128(); S];
    for s in 0..S {
        (abef[s], cdgh[s]) = load_state(&states[s]);
    }
    // One or two streams run fastest with the block loop unrolled; three streams unrolled over
    // 20 blocks no longer fit the instruction cache and run a third slower, so for them the
    // count is made opaque to the compiler.
    let blocks = if S >= 3 { core::hint::black_box(H / 2) } else { H / 2 };
    for j in 0..blocks {
        let save_a = abef;
        let save_c = cdgh;
        let mut w = [[_mm_setzero_si128(); 4]; S];
        for s in 0..S {
            w[s] = load_halves(halves[s][2 * j], halves[s][2 * j + 1], mask);
        }
        block_rounds::<S>(&mut abef, &mut cdgh, &mut w);
        for s in 0..S {
            abef[s] = _mm_add_epi32(abef[s], save_a[s]);
            cdgh[s] = _mm_add_epi32(cdgh[s], save_c[s]);
        }
    }
    for s in 0..S {
        store_state(&mut states[s], abef[s], cdgh[s]);
    }
}
