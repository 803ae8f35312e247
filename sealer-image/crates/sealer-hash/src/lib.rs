//! SDR label hashing for the sealer.
//!
//! One SDR label is `trim(SHA256(B ‖ parents…))` where `B` is a 64-byte header block
//! (replica id, layer, node) followed by 37 parent slots of 32 bytes: 20 compression blocks
//! including padding (2 for node 0). This crate provides:
//!
//! * [`Kernel`]: the compression kernel, chosen at run time. [`Kernel::ShaNi`] uses the x86
//!   SHA extensions and can hash two independent streams interleaved in one thread
//!   ("multi-buffer x2"), which fills the latency gaps of the dependent `sha256rnds2` chain.
//!   [`Kernel::Portable`] goes through the `sha2` crate and exists for tests and CPUs
//!   without SHA-NI; callers must opt in to it explicitly (see [`Kernel::select`]).
//! * [`LabelHasher`]: builds the 20-block message from a parent buffer and hashes one or two
//!   sectors at once.
//! * [`replica_id`] and [`cc_comm_d`]: the per-sector identity values of PC1.

#![warn(missing_docs)]

use sha2::{Digest, Sha256};

mod shani;

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
    /// x86-64 SHA extensions (SHA-NI), with a 2-stream interleaved variant.
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

    /// Compress `blocks` (a sequence of pointers to 64-byte blocks) into `state`.
    ///
    /// # Safety
    /// Every pointer must be valid for 64 bytes of reads. When `self` is [`Kernel::ShaNi`], the CPU
    /// must have the SHA extensions, SSSE3 and SSE4.1 ([`Kernel::sha_ni_available`]; guaranteed when
    /// the kernel came from [`Kernel::select`], not when the variant is named directly).
    #[inline]
    pub unsafe fn compress(self, state: &mut [u32; 8], blocks: &[*const u8]) {
        match self {
            // SAFETY: the CPU features and the 64 readable bytes per pointer are this fn's contract.
            #[cfg(target_arch = "x86_64")]
            Kernel::ShaNi => shani::compress_x1(state, blocks),
            _ => portable_compress(state, blocks),
        }
    }

    /// Compress two independent streams of equally many blocks, interleaved when the kernel
    /// supports it.
    ///
    /// # Safety
    /// Every pointer must be valid for 64 bytes of reads; both slices have the same length. When
    /// `self` is [`Kernel::ShaNi`], the CPU must have the SHA extensions, SSSE3 and SSE4.1
    /// ([`Kernel::sha_ni_available`]; guaranteed when the kernel came from [`Kernel::select`]).
    #[inline]
    pub unsafe fn compress_x2(
        self,
        sa: &mut [u32; 8],
        sb: &mut [u32; 8],
        blocks_a: &[*const u8],
        blocks_b: &[*const u8],
    ) {
        debug_assert_eq!(blocks_a.len(), blocks_b.len());
        match self {
            // SAFETY: the CPU features and the 64 readable bytes per pointer are this fn's contract.
            #[cfg(target_arch = "x86_64")]
            Kernel::ShaNi => shani::compress_x2(sa, sb, blocks_a, blocks_b),
            _ => {
                portable_compress(sa, blocks_a);
                portable_compress(sb, blocks_b);
            }
        }
    }
}

/// Compress `blocks` into `state` with the `sha2` crate.
///
/// # Safety
/// Every pointer in `blocks` must be valid for 64 bytes of reads, not written during the call.
unsafe fn portable_compress(state: &mut [u32; 8], blocks: &[*const u8]) {
    for &p in blocks {
        let mut b = sha2::digest::generic_array::GenericArray::<u8, sha2::digest::consts::U64>::default();
        // SAFETY: `p` is valid for 64 bytes of reads (this fn's contract); u8 needs no alignment.
        b.copy_from_slice(std::slice::from_raw_parts(p, 64));
        sha2::compress256(state, std::slice::from_ref(&b));
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

/// Padding block that ends a 37-slot label message: slot bytes are written in `[0..32]`,
/// then 0x80, zeros and the 64-bit bit length 9984.
fn tail_template() -> [u8; 64] {
    let mut t = [0u8; 64];
    t[32] = 0x80;
    t[56..64].copy_from_slice(&(1248u64 * 8).to_be_bytes());
    t
}

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
    b[32..36].copy_from_slice(&layer.to_be_bytes());
    b[36..44].copy_from_slice(&node.to_be_bytes());
    b
}

/// Builds SDR label messages from parent buffers and hashes them.
///
/// Parent buffers hold the parents of one node of one sector, in parent-array order:
/// 6 base parents (layer 1, 192 bytes) or 6 base + 8 expander parents (layers ≥ 2, 448 bytes).
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

    /// Block pointer list for a 20-block label message (header block, parent blocks, tail).
    #[inline]
    fn plan(layer: u32, header: *const u8, parents: *const u8, tail: *const u8, out: &mut [*const u8; 20]) {
        out[0] = header;
        if layer == 1 {
            // 6 parents = 3 blocks, repeated 6 times (slots 1..=36), then slot 0 in the tail.
            for r in 0..6 {
                for b in 0..3 {
                    // SAFETY: b <= 2, so the offset (<= 128) stays inside `parents`: both callers pass
                    // `parents.as_ptr()` of a slice asserted to hold parent_bytes(1) = 192 bytes.
                    out[1 + r * 3 + b] = unsafe { parents.add(b * 64) };
                }
            }
        } else {
            // 14 parents = 7 blocks, twice (28 slots), then slots 0..8 (4 blocks), then slot 8 in the tail.
            for r in 0..2 {
                for b in 0..7 {
                    // SAFETY: b <= 6, so the offset (<= 384) stays inside `parents`: both callers pass
                    // `parents.as_ptr()` of a slice asserted to hold parent_bytes(layer) = 448 bytes.
                    out[1 + r * 7 + b] = unsafe { parents.add(b * 64) };
                }
            }
            for b in 0..4 {
                // SAFETY: b <= 3, offset <= 192, inside the >= 448-byte `parents` slice (see above).
                out[15 + b] = unsafe { parents.add(b * 64) };
            }
        }
        out[19] = tail;
    }

    #[inline]
    fn tail_for(layer: u32, parents: &[u8]) -> [u8; 64] {
        let mut t = tail_template();
        let slot = if layer == 1 { 0 } else { 8 };
        t[..32].copy_from_slice(&parents[slot * 32..slot * 32 + 32]);
        t
    }

    /// Label of node `node` (≥ 1) of `layer` (1-based) for one sector.
    /// `parents` holds 6 (layer 1) or 14 (layer ≥ 2) parent labels; `out` gets 32 bytes.
    pub fn label(&self, replica_id: &[u8; 32], layer: u32, node: u64, parents: &[u8], out: &mut [u8]) {
        assert!(parents.len() >= parent_bytes(layer));
        if node == 0 {
            return self.label_node0(replica_id, layer, out);
        }
        let h = header_block(replica_id, layer, node);
        let t = Self::tail_for(layer, parents);
        let mut plan = [std::ptr::null(); 20];
        Self::plan(layer, h.as_ptr(), parents.as_ptr(), t.as_ptr(), &mut plan);
        let mut st = SHA256_IV;
        // SAFETY: each of the 20 plan pointers points to 64 readable bytes: `h` and `t` are 64-byte
        // locals that outlive the call, and the parent blocks start at offsets <= 384 (<= 128 for
        // layer 1) of `parents`, asserted above to hold parent_bytes(layer) = 448 (192) bytes.
        // The SHA-NI CPU requirement of Kernel::ShaNi is NOT checked here: it rests on the kernel
        // having come from Kernel::select (LabelHasher::new accepts any Kernel).
        unsafe { self.kernel.compress(&mut st, &plan) };
        state_to_label(&st, out);
    }

    /// Labels of the same node of two sectors at once (multi-buffer when SHA-NI is used).
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
        let pb = parent_bytes(layer);
        assert!(parents_a.len() >= pb && parents_b.len() >= pb);
        if node == 0 {
            self.label_node0(rid_a, layer, out_a);
            self.label_node0(rid_b, layer, out_b);
            return;
        }
        let ha = header_block(rid_a, layer, node);
        let hb = header_block(rid_b, layer, node);
        let ta = Self::tail_for(layer, parents_a);
        let tb = Self::tail_for(layer, parents_b);
        let mut pa = [std::ptr::null(); 20];
        let mut pbp = [std::ptr::null(); 20];
        Self::plan(layer, ha.as_ptr(), parents_a.as_ptr(), ta.as_ptr(), &mut pa);
        Self::plan(layer, hb.as_ptr(), parents_b.as_ptr(), tb.as_ptr(), &mut pbp);
        let mut sa = SHA256_IV;
        let mut sb = SHA256_IV;
        // SAFETY: as in `label`, for each stream: every pointer of `pa` / `pbp` points to 64 readable
        // bytes (64-byte locals `ha`/`ta`, `hb`/`tb`, or blocks inside `parents_a` / `parents_b`,
        // both asserted to hold parent_bytes(layer) bytes); both plans have 20 entries. The SHA-NI
        // CPU requirement rests on how `self.kernel` was chosen (not checked here).
        unsafe { self.kernel.compress_x2(&mut sa, &mut sb, &pa, &pbp) };
        state_to_label(&sa, out_a);
        state_to_label(&sb, out_b);
    }

    /// Label of node 0 (header block only, no parents).
    pub fn label_node0(&self, replica_id: &[u8; 32], layer: u32, out: &mut [u8]) {
        let h = header_block(replica_id, layer, 0);
        let plan = [h.as_ptr(), NODE0_PAD.as_ptr()];
        let mut st = SHA256_IV;
        // SAFETY: both pointers point to 64-byte arrays (the local header `h`, the static NODE0_PAD)
        // alive for the call. The SHA-NI CPU requirement rests on how `self.kernel` was chosen.
        unsafe { self.kernel.compress(&mut st, &plan) };
        state_to_label(&st, out);
    }
}

/// Bytes of parent data a label of `layer` consumes: 6 or 14 parents of 32 bytes.
#[inline]
pub const fn parent_bytes(layer: u32) -> usize {
    if layer == 1 {
        BASE_DEGREE * NODE_BYTES
    } else {
        DEGREE * NODE_BYTES
    }
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
}
