//! The stacked-DRG parent graph for the sealer.
//!
//! The graph is built by `storage-proofs-porep` (`StackedBucketGraph`), which also writes the
//! standard parent cache file (`v28-sdr-parent-<hex>.cache` under `FIL_PROOFS_PARENT_CACHE`,
//! 14 × LE32 per node). [`Parents`] maps that file read-only so every thread of a batch shares
//! one copy, exactly the file rust-fil-proofs and SupraSeal read.

#![warn(missing_docs)]

use filecoin_hashers::poseidon::PoseidonHasher;
use std::path::{Path, PathBuf};
use storage_proofs_core::api_version::ApiVersion as SpApi;
use storage_proofs_core::drgraph::BASE_DEGREE;
use storage_proofs_porep::stacked::{StackedBucketGraph, EXP_DEGREE};

pub mod store;

/// Parents per node (6 base + 8 expander).
pub const DEGREE: usize = 14;

/// Graph API version (mirrors `storage_proofs_core::api_version::ApiVersion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphApi {
    /// 1.0.0 (legacy graph).
    V1_0_0,
    /// 1.1.0.
    V1_1_0,
    /// 1.2.0.
    V1_2_0,
}

impl GraphApi {
    fn to_sp(self) -> SpApi {
        match self {
            GraphApi::V1_0_0 => SpApi::V1_0_0,
            GraphApi::V1_1_0 => SpApi::V1_1_0,
            GraphApi::V1_2_0 => SpApi::V1_2_0,
        }
    }
}

/// Error from graph construction or the cache file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GraphError(pub String);

/// The parent table of one graph, memory-mapped from the parent cache file.
pub struct Parents {
    map: memmap2::Mmap,
    nodes: u64,
    path: PathBuf,
}

impl Parents {
    /// Build (or reuse) the parent cache for `nodes` nodes and `porep_id` and map it.
    /// Generating the file for a new graph takes seconds (8 MiB) to minutes (32 GiB).
    pub fn open(nodes: u64, porep_id: [u8; 32], api: GraphApi) -> Result<Self, GraphError> {
        let graph = stacked_graph(nodes, porep_id, api)?;
        let cache = graph.parent_cache().map_err(|e| GraphError(format!("creating the parent cache file: {e:#}")))?;
        Self::from_file(&cache.path, nodes)
    }

    /// Map an existing parent cache file.
    pub fn from_file(path: &Path, nodes: u64) -> Result<Self, GraphError> {
        let f = std::fs::File::open(path)
            .map_err(|e| GraphError(format!("opening parent cache {}: {e}", path.display())))?;
        let len = f.metadata().map_err(|e| GraphError(e.to_string()))?.len();
        if len < nodes * DEGREE as u64 * 4 {
            return Err(GraphError(format!(
                "parent cache {} has {len} bytes, expected {}",
                path.display(),
                nodes * DEGREE as u64 * 4
            )));
        }
        // SAFETY: the map is read-only and owned by Parents, and get() bounds-checks every access.
        // Mmap::map additionally requires that the file is not truncated or modified while mapped:
        // this relies on the parent cache being written once (by rust-fil-proofs) and only read after;
        // nothing here can enforce that against other processes.
        let map = unsafe { memmap2::Mmap::map(&f) }
            .map_err(|e| GraphError(format!("mapping parent cache {}: {e}", path.display())))?;
        Ok(Parents { map, nodes, path: path.to_path_buf() })
    }

    /// Nodes in the graph.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Path of the cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The 14 parents of `node` (6 base, then 8 expander).
    #[inline]
    pub fn get(&self, node: u64) -> [u32; DEGREE] {
        let off = node as usize * DEGREE * 4;
        let b = &self.map[off..off + DEGREE * 4];
        let mut out = [0u32; DEGREE];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u32::from_le_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        }
        out
    }
}

/// The stacked DRG of rust-fil-proofs for these parameters.
fn stacked_graph(
    nodes: u64,
    porep_id: [u8; 32],
    api: GraphApi,
) -> Result<StackedBucketGraph<PoseidonHasher>, GraphError> {
    StackedBucketGraph::<PoseidonHasher>::new_stacked(nodes as usize, BASE_DEGREE, EXP_DEGREE, porep_id, api.to_sp())
        .map_err(|e| GraphError(format!("building the parent graph: {e:#}")))
}

/// Parents straight from the graph (no cache file): slow, for tests.
pub fn graph_parents(nodes: u64, porep_id: [u8; 32], api: GraphApi, node: u64) -> [u32; DEGREE] {
    use storage_proofs_core::drgraph::Graph;
    let graph = stacked_graph(nodes, porep_id, api).expect("graph");
    let mut p = [0u32; DEGREE];
    graph.parents(node as usize, &mut p).expect("parents");
    p
}
