//! The shapes of a sector's trees and of one record of the synthetic proofs file, and reads of
//! the tree files PC2 wrote (rows from the file, the small top rows kept in memory).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes of a node.
pub const NODE: usize = 32;

/// Rows with at most this many nodes are read once and kept (shared by every challenge).
pub(super) const CACHED_ROW_NODES: u64 = 1 << 15;

/// The trees of one sector size as filecoin-proofs shapes them: tree-d binary over every node;
/// tree-c and tree-r-last arity 8 over `trees` base trees, joined by a sub level of arity 8
/// (32 GiB, 64 GiB) and a top level of arity 2 (64 GiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Nodes of the sector.
    pub nodes: u64,
    /// SDR layers (labels in a column).
    pub layers: usize,
    /// Base trees of tree-c and tree-r-last.
    pub trees: usize,
    /// Leaves of one base tree.
    pub leaves: u64,
    /// Arity-8 levels of a base tree (log8 leaves).
    pub base_levels: usize,
    /// Rows of tree-r-last above the leaves that are not stored (rebuilt from the replica).
    pub rows_to_discard: usize,
}

impl Shape {
    /// The shape of `sector_size` with `layers` layers.
    pub fn of(sector_size: u64, layers: usize) -> Self {
        let nodes = sector_size / NODE as u64;
        let trees = sealer_pc2::base_tree_count(sector_size);
        let leaves = nodes / trees as u64;
        Shape {
            nodes,
            layers,
            trees,
            leaves,
            base_levels: (leaves.trailing_zeros() / 3) as usize,
            rows_to_discard: sealer_pc2::rows_to_discard(leaves),
        }
    }

    /// Siblings in a tree-d path: one per binary level.
    pub fn path_d_len(&self) -> usize {
        self.nodes.trailing_zeros() as usize
    }

    /// Siblings in a tree-c or tree-r-last path: 7 per base level, 7 at the sub level, 1 at
    /// the top level.
    pub fn path_r_len(&self) -> usize {
        7 * self.base_levels + if self.trees >= 8 { 7 } else { 0 } + if self.trees == 16 { 1 } else { 0 }
    }

    /// Bytes of one challenge's record: its index and 14 parents' (8 bytes each), tree-d leaf
    /// and path, 15 columns each with its tree-c leaf and path, tree-r-last leaf and path.
    pub fn record_bytes(&self) -> usize {
        let path_r = (1 + self.path_r_len()) * NODE;
        8 * 15 + (1 + self.path_d_len()) * NODE + 15 * (self.layers * NODE + path_r) + path_r
    }

    /// Leaves of a tree-r-last segment: the leaves under one node of the first stored row.
    pub fn segment_leaves(&self) -> u64 {
        8u64.pow(self.rows_to_discard as u32 + 1)
    }
}

/// One tree file PC2 wrote: rows from `first_stored` up, concatenated, leaves first.
pub struct TreeFile {
    file: File,
    offsets: Vec<Option<u64>>,
    cached: Vec<Option<Vec<u8>>>,
}

impl TreeFile {
    /// Open a tree of `leaves` leaves and arity `2^arity_bits` whose file holds the rows from
    /// `first_stored`; its size must be theirs.
    pub fn open(path: &Path, leaves: u64, arity_bits: u32, first_stored: usize) -> anyhow::Result<Self> {
        let mut sizes = vec![leaves];
        while *sizes.last().unwrap() > 1 {
            sizes.push(sizes.last().unwrap() >> arity_bits);
        }
        let mut off = 0u64;
        let offsets: Vec<Option<u64>> = sizes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (i >= first_stored).then(|| {
                    off += s * NODE as u64;
                    off - s * NODE as u64
                })
            })
            .collect();
        let file = File::open(path).map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
        let len = file.metadata()?.len();
        anyhow::ensure!(len == off, "{} has {len} bytes, its tree has {off}", path.display());
        let cached = sizes
            .iter()
            .zip(&offsets)
            .map(|(&s, o)| match o {
                Some(o) if s <= CACHED_ROW_NODES => {
                    let mut row = vec![0u8; s as usize * NODE];
                    file.read_exact_at(&mut row, *o).map(|_| Some(row))
                }
                _ => Ok(None),
            })
            .collect::<std::io::Result<_>>()
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        Ok(TreeFile { file, offsets, cached })
    }

    /// Nodes `[idx, idx + out.len() / 32)` of `row` into `out`.
    pub fn read(&self, row: usize, idx: u64, out: &mut [u8]) -> std::io::Result<()> {
        let start = idx as usize * NODE;
        if let Some(r) = &self.cached[row] {
            out.copy_from_slice(&r[start..start + out.len()]);
            return Ok(());
        }
        let off = self.offsets[row].expect("a stored row") + start as u64;
        self.file.read_exact_at(out, off)
    }

    /// The root (the last row's only node).
    pub fn root(&self) -> std::io::Result<[u8; NODE]> {
        let mut r = [0u8; NODE];
        self.read(self.offsets.len() - 1, 0, &mut r)?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// filecoin-proofs' `SynthProofs::proof_size` as measured (the cost table holds the same).
    #[test]
    fn record_bytes_are_filecoin_proofs_proof_size() {
        assert_eq!(Shape::of(2048, 2).record_bytes(), 8_984);
        assert_eq!(Shape::of(8 << 20, 2).record_bytes(), 23_704);
        assert_eq!(Shape::of(512 << 20, 2).record_bytes(), 31_064);
        assert_eq!(Shape::of(32 << 30, 11).record_bytes(), 42_744);
        assert_eq!(Shape::of(64 << 30, 11).record_bytes(), 43_288);
        assert_eq!(Shape::of(32 << 30, 11).segment_leaves(), 512);
        assert_eq!(Shape::of(2048, 2).segment_leaves(), 64);
    }
}
