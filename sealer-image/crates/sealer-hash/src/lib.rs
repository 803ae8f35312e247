//! SDR label hashing for the sealer.
//!
//! One SDR label is `trim(SHA256(B ‖ parents…))` where `B` is a 64-byte header block
//! (replica id, layer, node) followed by 37 parent slots of 32 bytes: 20 compression blocks
//! including padding (2 for node 0). This crate provides:
//!
//! * [`Kernel`]: the compression kernel, chosen at run time. [`Kernel::ShaNi`] uses the x86
//!   SHA extensions and hashes up to three independent streams interleaved in one thread
//!   (multi-buffer), which fills the latency gaps of the dependent `sha256rnds2` chain.
//!   [`Kernel::Portable`] goes through the `sha2` crate and exists for tests and CPUs
//!   without SHA-NI; callers must opt in to it explicitly (see [`Kernel::select`]).
//! * [`LabelHasher`]: hashes the 20-block messages of one to three sectors at once from
//!   pointers to their parents, wherever those lie (no copy of the message).
//! * [`replica_id`] and [`cc_comm_d`]: the per-sector identity values of PC1.
//! * [`bound_rate`]: the labels/s one thread reaches on this CPU (benchmarks, `sealer qualify`).

#![warn(missing_docs)]

use sha2::{Digest, Sha256};

mod rate;
mod shani;

pub use rate::bound_rate;

/// Bytes in one node / label.
pub const NODE_BYTES: usize = 32;
/// Base (DRG) parents per node.
pub const BASE_DEGREE: usize = 6;
/// Expander parents per node (layers ≥ 2 only).
pub const EXP_DEGREE: usize = 8;
/// All parents per node.
pub const DEGREE: usize = BASE_DEGREE + EXP_DEGREE;

/// SHA-256 initial state.
pub const SHA256_IV: [u32; 8] =
    [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// Which SHA-256 compression implementation is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// x86-64 SHA extensions (SHA-NI), with multi-stream interleaved variants.
    ShaNi,
    /// The `sha2` crate's `compress256` (software or its own detection). Tests / other CPUs.
    Portable,
}

/// Error returned when the fast kernel is required but unavailable.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "this CPU lacks the SHA extensions (sha_ni + sse4.1); the sealer's hot path needs them. \
     Run on a CPU with SHA-NI, or pass --allow-portable-hash to accept a much slower software kernel"
)]
pub struct NoShaNi;

impl Kernel {
    /// True when the SHA-NI kernel can run on this CPU.
    pub fn sha_ni_available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("sha")
                && std::is_x86_feature_detected!("sse4.1")
                && std::is_x86_feature_detected!("ssse3")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Pick the kernel for the hot path: SHA-NI when available; otherwise the portable kernel
    /// only if `allow_portable` is set, else an error. Never falls back silently.
    pub fn select(allow_portable: bool) -> Result<Kernel, NoShaNi> {
        if Self::sha_ni_available() {
            Ok(Kernel::ShaNi)
        } else if allow_portable {
            Ok(Kernel::Portable)
        } else {
            Err(NoShaNi)
        }
    }

    /// Compress `S` independent messages of `H / 2` blocks each; block `j` of stream `s` is the
    /// two 32-byte halves at `halves[s][2j]` and `halves[s][2j + 1]` (see [`LabelHasher`]).
    /// Interleaved when the kernel supports it.
    ///
    /// # Safety
    /// Every pointer must be valid for 32 bytes of reads. When `self` is [`Kernel::ShaNi`], the CPU
    /// must have the SHA extensions, SSSE3 and SSE4.1 ([`Kernel::sha_ni_available`]; guaranteed
    /// when the kernel came from [`Kernel::select`]).
    #[inline]
    pub unsafe fn compress_halves<const S: usize, const H: usize>(
        self,
        states: &mut [[u32; 8]; S],
        halves: &[[*const u8; H]; S],
    ) {
        match self {
            // SAFETY: the CPU features and the 32 readable bytes per pointer are this fn's contract.
            #[cfg(target_arch = "x86_64")]
            Kernel::ShaNi => shani::compress_halves(states, halves),
            _ => {
                let mut block = sha2::digest::generic_array::GenericArray::<u8, sha2::digest::consts::U64>::default();
                for (st, hs) in states.iter_mut().zip(halves) {
                    for pair in hs.chunks_exact(2) {
                        // SAFETY: each half is valid for 32 bytes of reads (this fn's contract).
                        block[..32].copy_from_slice(std::slice::from_raw_parts(pair[0], 32));
                        block[32..].copy_from_slice(std::slice::from_raw_parts(pair[1], 32));
                        sha2::compress256(st, std::slice::from_ref(&block));
                    }
                }
            }
        }
    }
}

/// Serialise a SHA-256 state as the big-endian digest and apply the Fr32 trim
/// (clear the top two bits of byte 31).
#[inline]
pub fn state_to_label(state: &[u32; 8], out: &mut [u8]) {
    for (i, w) in state.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&w.to_be_bytes());
    }
    out[31] &= 0x3f;
}

/// Blocks of a label message for node ≥ 1: the header block, 37 parent slots of 32 bytes
/// and the padding, 1,248 + 32 bytes.
pub const LABEL_BLOCKS: usize = 20;

/// Parent slots 0..=35 of a label message (slot `i` holds parent `i mod parents(layer)`) as the
/// parent pair of each of blocks 1..=18: on layer 1 the 3 pairs of the 6 base parents six
/// times; above, the 7 pairs of 14 parents twice, then pairs 0..=3. Slot 36 (in the last block)
/// is parent 0 on layer 1 and parent 8 above.
const BASE_PAIRS: [u8; 18] = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2];
const EXP_PAIRS: [u8; 18] = [0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3];

/// The second half of the last block: the padding after slot 36 (0x80, zeros, and the 64-bit
/// bit length of the 1,248-byte message).
static TAIL_HALF: [u8; 32] = {
    let mut t = [0u8; 32];
    t[0] = 0x80;
    let bits = (1248u64 * 8).to_be_bytes();
    let mut i = 0;
    while i < 8 {
        t[24 + i] = bits[i];
        i += 1;
    }
    t
};

/// Padding block for node 0 (message is the 64-byte header only).
const fn node0_pad() -> [u8; 64] {
    let mut t = [0u8; 64];
    t[0] = 0x80;
    // 512 bits, big-endian in the last 8 bytes.
    t[62] = 0x02;
    t
}
static NODE0_PAD: [u8; 64] = node0_pad();

/// The 64-byte first block of every label: `replica_id ‖ BE32(layer) ‖ BE64(node) ‖ 0^20`.
#[inline]
pub fn header_block(replica_id: &[u8; 32], layer: u32, node: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..32].copy_from_slice(replica_id);
    b[32..].copy_from_slice(&header_half(layer, node));
    b
}

/// The header block's second half, the same for every sector: `BE32(layer) ‖ BE64(node) ‖ 0^20`.
#[inline]
fn header_half(layer: u32, node: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[..4].copy_from_slice(&layer.to_be_bytes());
    b[4..12].copy_from_slice(&node.to_be_bytes());
    b
}

/// Parents a label of `layer` (1-based) hashes: 6 base parents on layer 1, 14 above.
#[inline]
pub const fn parents_of_layer(layer: u32) -> usize {
    if layer == 1 {
        BASE_DEGREE
    } else {
        DEGREE
    }
}

/// Builds SDR label messages where their pieces lie and hashes them, without copying parents.
///
/// A label message is read as 40 halves of 32 bytes: the replica id, the header's second half,
/// the 37 parent slots (each a pointer to a parent label wherever it is stored) and the padding.
/// So the parents of a batch's node can be hashed straight from the rows they were read into:
/// in a row-major layer (`[node][sector][32 B]`), parent `k` of sector `s` lies at `rows[k] + 32 s`
/// ([`LabelHasher::label_rows`]).
#[derive(Clone, Copy, Debug)]
pub struct LabelHasher {
    kernel: Kernel,
}

impl LabelHasher {
    /// A hasher using `kernel`.
    pub fn new(kernel: Kernel) -> Self {
        LabelHasher { kernel }
    }

    /// The kernel in use.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Hash `S` labels of node `node` (≥ 1) of `layer`: stream `i` has replica id `rids[i]`, its
    /// parent `k` at `parents[i][k]`, and writes its 32-byte label to `outs[i]`.
    ///
    /// # Safety
    /// Each `rids[i]` and each of the first `parents_of_layer(layer)` pointers of `parents[i]` must
    /// be valid for 32 bytes of reads, each `outs[i]` for 32 bytes of writes, and no output may
    /// overlap an input or another output. The SHA-NI CPU requirement of `Kernel::ShaNi` rests on
    /// the kernel having come from `Kernel::select` (not checked here).
    #[inline]
    pub unsafe fn label_streams<const S: usize>(
        &self,
        layer: u32,
        node: u64,
        rids: [*const u8; S],
        parents: &[[*const u8; DEGREE]; S],
        outs: [*mut u8; S],
    ) {
        debug_assert!(node > 0);
        let np = parents_of_layer(layer);
        let hdr = header_half(layer, node);
        // Block 0: id and header; blocks 1..=18: slots 0..=35 by parent pairs; block 19: slot 36
        // and the padding.
        let (pairs, last) = if np == BASE_DEGREE { (&BASE_PAIRS, 0) } else { (&EXP_PAIRS, 8) };
        let mut halves = [[std::ptr::null(); 2 * LABEL_BLOCKS]; S];
        for i in 0..S {
            let (p, h) = (&parents[i], &mut halves[i]);
            (h[0], h[1]) = (rids[i], hdr.as_ptr());
            for (j, &k) in pairs.iter().enumerate() {
                (h[2 + 2 * j], h[3 + 2 * j]) = (p[2 * k as usize], p[2 * k as usize + 1]);
            }
            (h[2 * LABEL_BLOCKS - 2], h[2 * LABEL_BLOCKS - 1]) = (p[last], TAIL_HALF.as_ptr());
        }
        let mut st = [SHA256_IV; S];
        // SAFETY: every half points to 32 readable bytes: rids and parents by this fn's contract,
        // `hdr` (a local alive for the call) and the static TAIL_HALF.
        self.kernel.compress_halves(&mut st, &halves);
        for i in 0..S {
            // SAFETY: outs[i] is valid for 32 bytes of writes and overlaps nothing read (contract).
            state_to_label(&st[i], std::slice::from_raw_parts_mut(outs[i], 32));
        }
    }

    /// Label node `node` of `layer` for sectors `sectors` of a row-major batch: the parent `k`
    /// of sector `s` is the 32 bytes at `rows[k] + 32 s`, its replica id `rids[s]`, and its label
    /// goes to `out_row + 32 s`. Hashes three sectors per kernel call (two or one at the end; four
    /// left are two pairs).
    ///
    /// # Safety
    /// For every `s` in `sectors` and `k < parents_of_layer(layer)`: `rows[k] + 32 s` is valid for
    /// 32 bytes of reads and `out_row + 32 s` for 32 bytes of writes; no output overlaps a parent.
    /// `rids` must hold at least `sectors.end` ids. The SHA-NI CPU requirement rests on how
    /// `self.kernel` was chosen.
    pub unsafe fn label_rows(
        &self,
        layer: u32,
        node: u64,
        rows: &[*const u8; DEGREE],
        rids: &[[u8; 32]],
        sectors: std::ops::Range<usize>,
        out_row: *mut u8,
    ) {
        assert!(rids.len() >= sectors.end);
        if node == 0 {
            for s in sectors {
                self.label_node0(&rids[s], layer, std::slice::from_raw_parts_mut(out_row.add(32 * s), 32));
            }
            return;
        }
        let column = |s: usize| rows.map(|r| r.wrapping_add(32 * s));
        let mut s = sectors.start;
        while s < sectors.end {
            // SAFETY (all three arms): the streams are sectors s.. < sectors.end, whose parents,
            // ids and outputs are valid and disjoint by this fn's contract; rids[s..] is in bounds
            // (asserted above).
            match sectors.end - s {
                // 4 left: two x2 calls beat an x3 and a single stream.
                2 | 4 => {
                    let (a, b) = (s, s + 1);
                    let outs = [out_row.add(32 * a), out_row.add(32 * b)];
                    self.label_streams::<2>(
                        layer,
                        node,
                        [rids[a].as_ptr(), rids[b].as_ptr()],
                        &[column(a), column(b)],
                        outs,
                    );
                    s += 2;
                }
                1 => {
                    self.label_streams::<1>(layer, node, [rids[s].as_ptr()], &[column(s)], [out_row.add(32 * s)]);
                    s += 1;
                }
                _ => {
                    let (a, b, c) = (s, s + 1, s + 2);
                    let ids = [rids[a].as_ptr(), rids[b].as_ptr(), rids[c].as_ptr()];
                    let outs = [out_row.add(32 * a), out_row.add(32 * b), out_row.add(32 * c)];
                    self.label_streams::<3>(layer, node, ids, &[column(a), column(b), column(c)], outs);
                    s += 3;
                }
            }
        }
    }

    /// Contiguous parents of one sector (`parent_bytes(layer)` bytes) as parent pointers.
    fn parent_ptrs(layer: u32, parents: &[u8]) -> [*const u8; DEGREE] {
        assert!(parents.len() >= parent_bytes(layer));
        std::array::from_fn(|k| parents.as_ptr().wrapping_add(32 * (k % parents_of_layer(layer))))
    }

    /// Label of node `node` of `layer` (1-based) for one sector.
    /// `parents` holds 6 (layer 1) or 14 (layer ≥ 2) parent labels; `out` gets 32 bytes.
    pub fn label(&self, replica_id: &[u8; 32], layer: u32, node: u64, parents: &[u8], out: &mut [u8]) {
        let p = Self::parent_ptrs(layer, parents);
        assert!(out.len() >= 32);
        if node == 0 {
            return self.label_node0(replica_id, layer, out);
        }
        // SAFETY: p's pointers lie inside `parents` (asserted to hold parent_bytes(layer) bytes,
        // 32 per used parent), the id is a 32-byte array, `out` holds 32 writable bytes and, being
        // a unique borrow, overlaps no input.
        unsafe { self.label_streams::<1>(layer, node, [replica_id.as_ptr()], &[p], [out.as_mut_ptr()]) }
    }

    /// Labels of the same node of two sectors at once (interleaved when SHA-NI is used).
    #[allow(clippy::too_many_arguments)]
    pub fn label_x2(
        &self,
        rid_a: &[u8; 32],
        rid_b: &[u8; 32],
        layer: u32,
        node: u64,
        parents_a: &[u8],
        parents_b: &[u8],
        out_a: &mut [u8],
        out_b: &mut [u8],
    ) {
        let (pa, pb) = (Self::parent_ptrs(layer, parents_a), Self::parent_ptrs(layer, parents_b));
        assert!(out_a.len() >= 32 && out_b.len() >= 32);
        if node == 0 {
            self.label_node0(rid_a, layer, out_a);
            self.label_node0(rid_b, layer, out_b);
            return;
        }
        // SAFETY: as in `label`, for each of the two streams; the two outputs are distinct unique
        // borrows.
        unsafe {
            self.label_streams::<2>(
                layer,
                node,
                [rid_a.as_ptr(), rid_b.as_ptr()],
                &[pa, pb],
                [out_a.as_mut_ptr(), out_b.as_mut_ptr()],
            )
        }
    }

    /// Label of node 0 (header block only, no parents).
    pub fn label_node0(&self, replica_id: &[u8; 32], layer: u32, out: &mut [u8]) {
        let hdr = header_half(layer, 0);
        let halves = [[replica_id.as_ptr(), hdr.as_ptr(), NODE0_PAD.as_ptr(), NODE0_PAD[32..].as_ptr()]];
        let mut st = [SHA256_IV];
        // SAFETY: every half points to 32 readable bytes alive for the call (the id, the local
        // `hdr`, the two halves of the static NODE0_PAD). The SHA-NI CPU requirement rests on how
        // `self.kernel` was chosen.
        unsafe { self.kernel.compress_halves(&mut st, &halves) };
        state_to_label(&st[0], out);
    }
}

/// Bytes of parent data a label of `layer` consumes: 6 or 14 parents of 32 bytes.
#[inline]
pub const fn parent_bytes(layer: u32) -> usize {
    parents_of_layer(layer) * NODE_BYTES
}

/// Straightforward reference for one label: builds the 1,248-byte message and hashes it with
/// `sha2::Sha256`. Used by tests and by `verify-pc1`.
pub fn reference_label(replica_id: &[u8; 32], layer: u32, node: u64, parents: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(header_block(replica_id, layer, node));
    if node > 0 {
        let np = if layer == 1 { BASE_DEGREE } else { DEGREE };
        for i in 0..37 {
            let s = i % np;
            h.update(&parents[s * 32..s * 32 + 32]);
        }
    }
    let mut out: [u8; 32] = h.finalize().into();
    out[31] &= 0x3f;
    out
}

/// Plain SHA-256 of `data` (standard digest byte order).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// `replica_id = trim(SHA256(prover_id ‖ BE64(sector_id) ‖ ticket ‖ comm_d ‖ porep_id))`.
pub fn replica_id(
    prover_id: &[u8; 32],
    sector_id: u64,
    ticket: &[u8; 32],
    comm_d: &[u8; 32],
    porep_id: &[u8; 32],
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(prover_id);
    h.update(sector_id.to_be_bytes());
    h.update(ticket);
    h.update(comm_d);
    h.update(porep_id);
    let mut out: [u8; 32] = h.finalize().into();
    out[31] &= 0x3f;
    out
}

/// comm_d of an all-zero (CC) sector of `sector_size` bytes: the root of the binary
/// SHA-256 tree (with Fr32 trim at every node) over zero leaves.
pub fn cc_comm_d(sector_size: u64) -> [u8; 32] {
    let leaves = sector_size / 32;
    assert!(leaves.is_power_of_two(), "sector size must be a power of two");
    let levels = leaves.trailing_zeros();
    let mut z = [0u8; 32];
    for _ in 0..levels {
        let mut h = Sha256::new();
        h.update(z);
        h.update(z);
        z = h.finalize().into();
        z[31] &= 0x3f;
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rnd(seed: &mut u64, buf: &mut [u8]) {
        for b in buf.iter_mut() {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *b = (*seed >> 24) as u8;
        }
    }

    #[test]
    fn cc_comm_d_matches_spec() {
        assert_eq!(hex(&cc_comm_d(2048)), "fc7e928296e516faade986b28f92d44a4f24b935485223376a799027bc18f833");
        assert_eq!(hex(&cc_comm_d(8 << 20)), "65f29e5d98d246c38b388cfc06db1f6b021303c5a289000bdce832a9c3ec421c");
        assert_eq!(hex(&cc_comm_d(32 << 30)), "077e5fde35c50a9303a55009e3498a4ebedff39c42b710b730d8ec7ac7afa63e");
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn replica_id_matches_spec_vector() {
        let prover: [u8; 32] = std::array::from_fn(|i| i as u8);
        let ticket = [0x11u8; 32];
        let mut porep = [0u8; 32];
        porep[0] = 5;
        let rid = replica_id(&prover, 1234, &ticket, &cc_comm_d(2048), &porep);
        assert_eq!(hex(&rid), "e906ca7d6bb59fbc321da6f66b577090e3088edc3def66672622fef9f8e97911");
    }

    #[test]
    fn kernels_agree_with_reference() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut kernels = vec![Kernel::Portable];
        if Kernel::sha_ni_available() {
            kernels.push(Kernel::ShaNi);
        }
        for k in kernels {
            let h = LabelHasher::new(k);
            for layer in [1u32, 2, 11] {
                for node in [0u64, 1, 2, 77, 1 << 33] {
                    let mut rid_a = [0u8; 32];
                    let mut rid_b = [0u8; 32];
                    let mut pa = [0u8; 448];
                    let mut pb = [0u8; 448];
                    rnd(&mut seed, &mut rid_a);
                    rnd(&mut seed, &mut rid_b);
                    rnd(&mut seed, &mut pa);
                    rnd(&mut seed, &mut pb);
                    let ea = reference_label(&rid_a, layer, node, &pa);
                    let eb = reference_label(&rid_b, layer, node, &pb);
                    let mut oa = [0u8; 32];
                    let mut ob = [0u8; 32];
                    h.label(&rid_a, layer, node, &pa, &mut oa);
                    assert_eq!(oa, ea, "{k:?} x1 layer {layer} node {node}");
                    h.label_x2(&rid_a, &rid_b, layer, node, &pa, &pb, &mut oa, &mut ob);
                    assert_eq!(oa, ea, "{k:?} x2a layer {layer} node {node}");
                    assert_eq!(ob, eb, "{k:?} x2b layer {layer} node {node}");
                }
            }
        }
    }

    /// Row-major batches of every size the kernel splits differently (x3, x2, x1 tails), parents
    /// scattered over distinct rows in any order, against the reference message.
    #[test]
    fn label_rows_agrees_with_reference() {
        let mut seed = 0x0bad_cafe_dead_beefu64;
        let mut kernels = vec![Kernel::Portable];
        if Kernel::sha_ni_available() {
            kernels.push(Kernel::ShaNi);
        }
        for k in kernels {
            let h = LabelHasher::new(k);
            for n in [1usize, 2, 3, 4, 5, 7, 8] {
                for layer in [1u32, 2, 5] {
                    for node in [0u64, 1, 3, 1 << 20] {
                        // 20 rows of n sectors; parents are 14 distinct rows chosen at random.
                        let mut store = vec![0u8; 20 * n * 32];
                        rnd(&mut seed, &mut store);
                        let mut rids = vec![[0u8; 32]; n + 1];
                        for r in rids.iter_mut() {
                            rnd(&mut seed, r);
                        }
                        let mut order: Vec<usize> = (0..20).collect();
                        for i in (1..20).rev() {
                            let mut b = [0u8; 1];
                            rnd(&mut seed, &mut b);
                            order.swap(i, b[0] as usize % (i + 1));
                        }
                        let rows: [*const u8; DEGREE] = std::array::from_fn(|k| store[order[k] * n * 32..].as_ptr());
                        let mut out = vec![0u8; (n + 1) * 32];
                        // Sectors 1..n+1 of a row shifted by one sector: a range not starting at 0.
                        let shifted: [*const u8; DEGREE] = rows.map(|r| r.wrapping_sub(32));
                        unsafe { h.label_rows(layer, node, &shifted, &rids, 1..n + 1, out.as_mut_ptr()) };
                        for s in 0..n {
                            let mut parents = [0u8; 448];
                            for (k, p) in parents.chunks_exact_mut(32).enumerate() {
                                let r = order[k] * n * 32 + s * 32;
                                p.copy_from_slice(&store[r..r + 32]);
                            }
                            let want = reference_label(&rids[s + 1], layer, node, &parents);
                            assert_eq!(
                                out[(s + 1) * 32..(s + 2) * 32],
                                want,
                                "{k:?} n {n} sector {s} layer {layer} node {node}"
                            );
                        }
                        assert_eq!(out[..32], [0u8; 32], "nothing written outside the range");
                    }
                }
            }
        }
    }
}
