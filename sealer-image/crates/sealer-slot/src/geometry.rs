//! Sizes of the interleaved layout and of the engine's buffers.

use sealer_storage::PAGE;

/// Geometry of one batch: how nodes map to pages, and the engine's chunk / ring sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Nodes per sector (sector_size / 32).
    pub nodes: u64,
    /// Sectors in the batch (N, a power of two ≤ 128).
    pub sectors: usize,
    /// SDR layers.
    pub layers: usize,
    /// Bytes of one interleaved row: node v of every sector, N × 32.
    pub row: usize,
    /// Rows (nodes) per 4 KiB page: 4096 / row.
    pub npp: u64,
    /// Pages per layer.
    pub ppl: u64,
    /// Nodes per chunk (the unit of read-ahead, hashing hand-off and write-back).
    pub chunk: u64,
    /// Chunks per layer.
    pub chunks: u64,
    /// Nodes kept in the in-memory node cache (ring) of the current layer.
    pub ring: u64,
    /// Chunks of read-ahead.
    pub depth: u64,
    /// Whole layers fit the cache budget twice: keep the previous layer in memory and serve
    /// expander parents from it (small sectors only; never for 32/64 GiB batches).
    pub keep_prev_layer: bool,
    /// Otherwise: nodes `[0, resident)` of the previous layer are read into memory at the start
    /// of each layer (one sequential read) and serve the expander parents among them, so each
    /// resident byte saves the same share of random reads (expanders are uniform over the
    /// layer). A multiple of the nodes per page, below 2^30; 0 when not used.
    pub resident: u64,
}

/// Tunables for [`Geometry::new`].
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Target nodes per chunk.
    pub chunk_nodes: u64,
    /// Memory budget of the node cache, bytes (default 1 GiB).
    pub ring_bytes: u64,
    /// Chunks of read-ahead.
    pub depth: u64,
    /// Memory for the resident part of the previous layer, bytes (default 0: none).
    pub resident_bytes: u64,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { chunk_nodes: 512, ring_bytes: 1 << 30, depth: 4, resident_bytes: 0 }
    }
}

fn pow2_floor(x: u64) -> u64 {
    if x == 0 {
        0
    } else {
        1u64 << (63 - x.leading_zeros())
    }
}

impl Geometry {
    /// Compute the geometry for `sectors` sectors of `nodes` nodes and `layers` layers.
    pub fn new(nodes: u64, sectors: usize, layers: usize, t: Tuning) -> Geometry {
        assert!(sectors.is_power_of_two() && sectors <= 128);
        assert!(nodes.is_power_of_two());
        let row = sectors * 32;
        let npp = (PAGE / row) as u64;
        let ppl = nodes.div_ceil(npp);
        let padded = ppl * npp;
        let chunk = pow2_floor(t.chunk_nodes.max(npp)).max(npp).min(padded);
        let chunks = padded / chunk;
        let depth = t.depth.clamp(1, chunks.max(1));
        let budget_nodes = pow2_floor(t.ring_bytes / row as u64).max(chunk * (depth + 2));
        let ring = if budget_nodes >= padded { padded } else { budget_nodes };
        let keep_prev_layer = ring == padded && padded < (1 << 30) && 2 * padded * row as u64 <= t.ring_bytes;
        let resident = if keep_prev_layer {
            0
        } else {
            (t.resident_bytes / row as u64).min(padded).min((1 << 30) - npp) / npp * npp
        };
        Geometry { nodes, sectors, layers, row, npp, ppl, chunk, chunks, ring, depth, keep_prev_layer, resident }
    }

    /// Chunks that fit in the ring.
    pub fn ring_chunks(&self) -> u64 {
        self.ring / self.chunk
    }

    /// Random page reads of layer `layer` (1-based) if every page that can hold a parent not in
    /// memory were read once: the previous layer's pages beyond the resident part (expander
    /// parents; none when the previous layer is in memory) and the current layer's pages older
    /// than the node cache (far base parents). The engine reads such a page once per chunk that
    /// needs it, so its count above this is what sharing reads across chunks could save. Not a
    /// strict floor: an old page no base parent points to is never read.
    pub fn min_page_reads(&self, layer: u32, prev_in_memory: bool) -> u64 {
        let expanders = if layer >= 2 && !prev_in_memory { self.ppl - self.resident / self.npp } else { 0 };
        let far_base = self.ppl - self.ring.min(self.ppl * self.npp) / self.npp;
        expanders + far_base
    }

    /// True when a base parent `p` of a node in chunk `c` is still in the ring.
    #[inline]
    pub fn in_ring(&self, c: u64, p: u64) -> bool {
        p + self.ring >= (c + 1) * self.chunk
    }
}

/// Random page reads per node step (one node of every sector) for the expander parents when
/// `resident` (0..=1) of the previous layer is in memory. At 32/64 GiB a page holds at most 32
/// rows and a chunk's parents almost never share one, so each of the 8 expanders is a read;
/// they are uniform over the layer, so the resident share needs none.
pub fn expander_reads_per_node(resident: f64) -> f64 {
    sealer_hash::EXP_DEGREE as f64 * (1.0 - resident)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_shapes() {
        let g = Geometry::new(64, 1, 2, Tuning::default());
        assert_eq!((g.npp, g.ppl, g.chunk, g.chunks, g.ring), (128, 1, 128, 1, 128));
        let g = Geometry::new(1 << 18, 32, 2, Tuning::default());
        assert_eq!(g.npp, 4);
        assert_eq!(g.ppl, 1 << 16);
        assert_eq!(g.ring, 1 << 18);
        let g = Geometry::new(1 << 30, 128, 11, Tuning::default());
        assert_eq!(g.npp, 1);
        assert_eq!(g.ring, 1 << 18);
        assert!(!g.keep_prev_layer);
        assert!(g.ring_chunks() >= g.depth + 2);
        assert_eq!(g.resident, 0);
        // Half of a 32 GiB layer of 32 sectors resident: 16 GiB × 32 = 512 GiB.
        let t = Tuning { resident_bytes: 512 << 30, ..Tuning::default() };
        let g = Geometry::new(1 << 30, 32, 11, t);
        assert_eq!(g.resident, 1 << 29);
        // Never more than the layer, never with the whole previous layer kept.
        let t = Tuning { resident_bytes: 1 << 40, ..Tuning::default() };
        assert_eq!(Geometry::new(1 << 18, 8, 2, t).resident, 0);
        let t = Tuning { ring_bytes: 1 << 20, resident_bytes: 1 << 40, ..Tuning::default() };
        assert_eq!(Geometry::new(1 << 18, 8, 2, t).resident, 1 << 18);
    }

    #[test]
    fn min_page_reads_counts_pages_not_in_memory() {
        // 8 MiB, N = 128: one node per page, 2^18 pages per layer.
        let whole = Geometry::new(1 << 18, 128, 2, Tuning::default());
        assert_eq!(whole.ring, 1 << 18);
        assert_eq!(whole.min_page_reads(1, false), 0, "layer 1: base parents all in the ring");
        assert_eq!(whole.min_page_reads(2, false), 1 << 18, "every page of layer 1 once");
        assert_eq!(whole.min_page_reads(2, true), 0);
        // A 64 MiB ring (2^14 nodes) and half of the previous layer resident.
        let t = Tuning { ring_bytes: 64 << 20, resident_bytes: 512 << 20, ..Tuning::default() };
        let split = Geometry::new(1 << 18, 128, 2, t);
        assert_eq!((split.ring, split.resident), (1 << 14, 1 << 17));
        assert_eq!(split.min_page_reads(1, false), (1 << 18) - (1 << 14));
        assert_eq!(split.min_page_reads(2, false), (1 << 17) + (1 << 18) - (1 << 14));
    }
}
