//! PC2's checkpoint: after every range, where each sector's trees stand (rows written, the
//! nodes waiting for their siblings, the finished base trees' roots), so a restarted PC2 goes
//! on from the next range instead of the first. Written under a `.tmp` name and renamed after
//! the replica and tree files are synced; removed when PC2 completes.

use crate::{fr, fr_bytes, TreeBuilder};
use blstrs::Scalar as Fr;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// File name under the output directory.
pub const FILE: &str = "pc2-checkpoint.json";

/// One streaming tree's state between ranges (empty for a sector given up).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct TreeState {
    /// Bytes written per level.
    pub written: Vec<u64>,
    /// Nodes per level still waiting for their siblings (hex).
    pub pending: Vec<Vec<String>>,
}

/// Where PC2 stopped.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    /// Whose checkpoint: the sectors' replica ids and comm_ds and the sector size.
    pub batch: String,
    /// Nodes per range when it was written (a resumed run uses at most this, so its ranges
    /// stay aligned with the trees' pending nodes).
    pub range: u64,
    /// The base tree in progress, and its next node (absolute).
    pub k: usize,
    /// Next node to hash.
    pub next: u64,
    /// Per sector: the roots of the finished base trees (hex), tree-c and tree-r-last.
    pub roots_c: Vec<Vec<String>>,
    /// See `roots_c`.
    pub roots_r: Vec<Vec<String>>,
    /// Per sector, tree-c's and tree-r-last's state in base tree `k` (empty at its start).
    pub tc: Vec<TreeState>,
    /// See `tc`.
    pub tr: Vec<TreeState>,
    /// The sectors given up so far: they stay given up (their trees were not fed since).
    #[serde(default)]
    pub lost: Vec<LostSector>,
}

/// A sector PC2 gave up, as a checkpoint keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct LostSector {
    pub sector_id: u64,
    pub class: String,
    pub reason: String,
}

pub(crate) fn path(output_dir: &Path) -> PathBuf {
    output_dir.join(FILE)
}

/// The batch identity a checkpoint must carry to be resumed.
pub(crate) fn batch_id(sector_size: u64, rids: &[[u8; 32]], cds: &[[u8; 32]]) -> String {
    let mut s = format!("{sector_size}");
    for (r, d) in rids.iter().zip(cds) {
        s.push(':');
        s.push_str(&hex::encode(r));
        s.push('/');
        s.push_str(&hex::encode(d));
    }
    s
}

/// The checkpoint of this batch, if one was left (a checkpoint of another batch is ignored).
pub(crate) fn load(output_dir: &Path, batch: &str) -> Option<Checkpoint> {
    let text = std::fs::read_to_string(path(output_dir)).ok()?;
    match serde_json::from_str::<Checkpoint>(&text) {
        Ok(c) if c.batch == batch => Some(c),
        Ok(_) => {
            log::warn!("{} belongs to another batch: PC2 starts from the first range", path(output_dir).display());
            None
        }
        Err(e) => {
            log::warn!("{} unreadable ({e}): PC2 starts from the first range", path(output_dir).display());
            None
        }
    }
}

pub(crate) fn save(output_dir: &Path, c: &Checkpoint) -> std::io::Result<()> {
    let p = path(output_dir);
    let tmp = crate::tmp_of(&p);
    std::fs::write(&tmp, serde_json::to_vec(c).expect("checkpoint serialises"))?;
    std::fs::rename(tmp, p)
}

pub(crate) fn hex_roots(roots: &[Vec<Fr>]) -> Vec<Vec<String>> {
    roots.iter().map(|r| r.iter().map(|x| hex::encode(fr_bytes(x))).collect()).collect()
}

pub(crate) fn parse_roots(roots: &[Vec<String>]) -> Option<Vec<Vec<Fr>>> {
    roots
        .iter()
        .map(|r| r.iter().map(|h| hex::decode(h).ok().filter(|b| b.len() == 32).map(|b| fr(&b))).collect())
        .collect()
}

impl TreeBuilder {
    /// Flush and sync what is written, and say where the tree stands.
    pub(crate) fn checkpoint(&mut self) -> std::io::Result<TreeState> {
        for l in 0..self.offsets.len() {
            self.flush_level(l)?;
        }
        if let Some(f) = &self.file {
            f.sync_data()?;
        }
        Ok(TreeState {
            written: self.written.clone(),
            pending: self.pending.iter().map(|p| p.iter().map(|x| hex::encode(fr_bytes(x))).collect()).collect(),
        })
    }

    /// Reopen a tree file a checkpoint described (its size and rows as `new` made them).
    pub(crate) fn resume(path: &Path, leaves: u64, first_stored: usize, st: &TreeState) -> std::io::Result<Self> {
        let bad =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {what}", path.display()));
        let mut b = TreeBuilder::layout(path, leaves, first_stored, false)?;
        if st.written.len() != b.written.len() || st.pending.len() != b.pending.len() {
            return Err(bad("the checkpoint has another number of rows"));
        }
        b.written = st.written.clone();
        for (level, p) in st.pending.iter().enumerate() {
            for h in p {
                let bytes = hex::decode(h).ok().filter(|x| x.len() == 32).ok_or_else(|| bad("bad pending node"))?;
                b.pending[level].push(fr(&bytes));
            }
        }
        Ok(b)
    }
}
