//! PC2's checkpoint: where each sector's trees stand (rows written, the nodes waiting for their
//! siblings, the finished base trees' roots), so a restarted PC2 goes on from the next range
//! instead of the first. Saved (synced, renamed, directory synced) only after the replica and
//! tree files it describes are synced; removed when PC2 completes.
//!
//! A resume trusts nothing it does not check: [`plan_resume`] validates every field against
//! the batch's shape, every file's size, and digests of sampled nodes of every row the
//! checkpoint covers (replica and both trees, as PC1's state does for layers). A checkpoint
//! that fails any check is deleted, and its directory synced, before PC2 writes anything: a
//! run that starts afresh truncates the `.tmp` files, and a stale checkpoint left beside them
//! would be trusted by the run after it, over holes.

use crate::{fr_bytes, fr_checked, tree_name, TreeBuilder};
use blstrs::Scalar as Fr;
use sealer_error::SealerError;
use sealer_storage::durable;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// File name under the output directory.
pub const FILE: &str = "pc2-checkpoint.json";

/// Nodes sampled evenly over each region a digest covers (the region's last node besides).
const SAMPLES: u64 = 32;

/// One streaming tree's state between ranges (empty for a sector given up).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct TreeState {
    /// Bytes written per level.
    pub written: Vec<u64>,
    /// Nodes per level still waiting for their siblings (hex).
    pub pending: Vec<Vec<String>>,
    /// Digest of sampled nodes of every stored level's written bytes, as synced.
    pub digest: String,
}

/// The digests of one finished base tree's files: tree-c, tree-r-last.
pub(crate) type TreeDigests = [String; 2];

/// Where PC2 stopped.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    /// Whose checkpoint: the sectors' replica ids and comm_ds and the sector size.
    pub batch: String,
    /// Nodes per range when it was written (a resumed run uses at most this, so its ranges
    /// stay aligned with the trees' pending nodes).
    pub range: u64,
    /// The base tree in progress (`t`: every base tree is finished).
    pub k: usize,
    /// Next node to hash (absolute).
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
    /// Per sector: digest of sampled nodes of its replica below `next` (empty when given up).
    pub replica: Vec<String>,
    /// Per sector, per finished base tree: its files' digests.
    pub finished: Vec<Vec<TreeDigests>>,
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

/// Save `c` durably: only after every file it describes was synced.
pub(crate) fn save(output_dir: &Path, c: &Checkpoint) -> std::io::Result<()> {
    durable::crash_point("pc2.checkpoint");
    durable::replace(&path(output_dir), &serde_json::to_vec(c).expect("checkpoint serialises"))
}

/// Delete the checkpoint durably: nothing may trust it again.
pub(crate) fn remove(output_dir: &Path) -> Result<(), SealerError> {
    durable::remove(&path(output_dir)).map_err(|e| crate::io("deleting the PC2 checkpoint", e))
}

pub(crate) fn hex_roots(roots: &[Vec<Fr>]) -> Vec<Vec<String>> {
    roots.iter().map(|r| r.iter().map(|x| hex::encode(fr_bytes(x))).collect()).collect()
}

/// A node written as hex: 32 bytes, a canonical field element.
fn parse_node(h: &str) -> Option<Fr> {
    hex::decode(h).ok().filter(|b| b.len() == 32).and_then(|b| fr_checked(&b))
}

/// Every sector's roots, or which one is not a node.
pub(crate) fn parse_roots(roots: &[Vec<String>]) -> Result<Vec<Vec<Fr>>, String> {
    roots
        .iter()
        .enumerate()
        .map(|(s, r)| {
            r.iter()
                .map(|h| parse_node(h).ok_or_else(|| format!("root {h:?} of sector index {s} is not a field element")))
                .collect()
        })
        .collect()
}

/// The nodes a digest samples from a region of `m` nodes.
fn samples(m: u64) -> impl Iterator<Item = u64> {
    let n = SAMPLES.min(m);
    (0..n).map(move |j| j * m / n).chain((m > 0).then(|| m - 1))
}

/// Digest of the sampled nodes of `regions` (byte offset, nodes) of `file`.
pub(crate) fn digest(file: &Path, regions: &[(u64, u64)]) -> std::io::Result<String> {
    let f = std::fs::File::open(file)?;
    let mut bytes = Vec::new();
    let mut node = [0u8; 32];
    for &(off, m) in regions {
        bytes.extend_from_slice(&off.to_le_bytes());
        bytes.extend_from_slice(&m.to_le_bytes());
        for i in samples(m) {
            f.read_exact_at(&mut node, off + i * 32)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{} at node {i}: {e}", file.display())))?;
            bytes.extend_from_slice(&node);
        }
    }
    Ok(hex::encode(sealer_hash::sha256(&bytes)))
}

/// Digest of a whole finished file.
pub(crate) fn file_digest(file: &Path) -> std::io::Result<String> {
    let len = std::fs::metadata(file)?.len();
    digest(file, &[(0, len / 32)])
}

/// What a batch looks like to its checkpoint.
pub(crate) struct Shape<'a> {
    /// Sector numbers in batch order.
    pub ids: Vec<u64>,
    /// Base trees per sector.
    pub t: usize,
    /// Leaves per base tree.
    pub leaves: u64,
    /// tree-r-last's first stored row.
    pub r_first: usize,
    /// Per sector: its replica's `.tmp` path and its cache directory.
    pub paths: &'a dyn Fn(usize) -> (PathBuf, PathBuf),
}

impl Shape<'_> {
    fn tmp_tree(&self, s: usize, kind: &str, k: usize) -> PathBuf {
        (self.paths)(s).1.join(format!("{}.tmp", tree_name(kind, k, self.t)))
    }
}

/// The checkpoint a resume may trust: this batch's, every field and file checked (see the
/// module's comment). Any other checkpoint is deleted before this returns; None then.
pub(crate) fn plan_resume(output_dir: &Path, batch: &str, shape: &Shape) -> Result<Option<Checkpoint>, SealerError> {
    let p = path(output_dir);
    let checked = match std::fs::read(&p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => Err(format!("the file is unreadable ({e})")),
        Ok(text) => serde_json::from_slice::<Checkpoint>(&text)
            .map_err(|e| format!("the file is unreadable ({e})"))
            .and_then(|c| if c.batch == batch { Ok(c) } else { Err("it belongs to another batch".to_string()) })
            .and_then(|c| check(&c, shape).map(|()| c)),
    };
    match checked {
        Ok(c) => Ok(Some(c)),
        Err(why) => {
            log::warn!("PC2 checkpoint {} ignored and deleted: {why}; PC2 starts from the first range", p.display());
            remove(output_dir)?;
            Ok(None)
        }
    }
}

/// Why `c` cannot be resumed from, if it cannot.
fn check(c: &Checkpoint, sh: &Shape) -> Result<(), String> {
    let (n, t, leaves) = (sh.ids.len(), sh.t, sh.leaves);
    if c.range == 0 || !c.range.is_power_of_two() || c.range > leaves {
        return Err(format!("its range of {} nodes is not a power of two of at most {leaves}", c.range));
    }
    if c.k > t {
        return Err(format!("it is at base tree {} of {t}", c.k + 1));
    }
    let first = c.k as u64 * leaves;
    let at_start = c.next == first;
    if c.next < first
        || (c.k < t && c.next >= first + leaves)
        || (c.k == t && !at_start)
        || !c.next.is_multiple_of(c.range)
    {
        return Err(format!("its next node {} is not a range start of base tree {}", c.next, c.k + 1));
    }
    for (what, len) in [
        ("roots_c", c.roots_c.len()),
        ("roots_r", c.roots_r.len()),
        ("replica", c.replica.len()),
        ("finished", c.finished.len()),
    ] {
        if len != n {
            return Err(format!("it lists {what} of {len} sectors, the batch has {n}"));
        }
    }
    let trees_ok = if at_start { c.tc.is_empty() && c.tr.is_empty() } else { c.tc.len() == n && c.tr.len() == n };
    if !trees_ok {
        return Err(format!("it has tree states of {} sectors at node {}", c.tc.len(), c.next));
    }
    if let Some(l) = c.lost.iter().find(|l| !sh.ids.contains(&l.sector_id)) {
        return Err(format!("it gave up sector {}, which is not in the batch", l.sector_id));
    }
    let roots_c = parse_roots(&c.roots_c)?;
    let roots_r = parse_roots(&c.roots_r)?;
    let live = |s: usize| !c.lost.iter().any(|l| l.sector_id == sh.ids[s]);
    // Fields first: nothing below reads a file for a checkpoint that cannot describe this batch.
    for s in (0..n).filter(|&s| live(s)) {
        let sector = sh.ids[s];
        if roots_c[s].len() != c.k || roots_r[s].len() != c.k || c.finished[s].len() != c.k {
            return Err(format!("sector {sector} has {} finished base trees, not {}", roots_c[s].len(), c.k));
        }
        if !at_start {
            for (first_stored, st) in [(0, &c.tc[s]), (sh.r_first, &c.tr[s])] {
                TreeBuilder::detached(leaves, first_stored).restore(st).map_err(|e| format!("sector {sector}: {e}"))?;
            }
        }
    }
    // Then every file it covers: its size, and its sampled nodes as they were synced.
    for s in (0..n).filter(|&s| live(s)) {
        let (replica, _) = (sh.paths)(s);
        let nodes = t as u64 * leaves;
        let size = std::fs::metadata(&replica).map_err(|e| format!("{}: {e}", replica.display()))?.len();
        if size != nodes * 32 {
            return Err(format!("{} has {size} bytes, not {}", replica.display(), nodes * 32));
        }
        let d = digest(&replica, &[(0, c.next)]).map_err(|e| e.to_string())?;
        if d != c.replica[s] {
            return Err(format!("{} is not what it was at the checkpoint (sampled nodes differ)", replica.display()));
        }
        for k in 0..c.k {
            for (i, kind) in ["tree-c", "tree-r-last"].into_iter().enumerate() {
                let f = sh.tmp_tree(s, kind, k);
                let d = file_digest(&f).map_err(|e| format!("{}: {e}", f.display()))?;
                if d != c.finished[s][k][i] {
                    return Err(format!("{} is not what it was at the checkpoint", f.display()));
                }
            }
        }
        if !at_start {
            for (kind, first_stored, st) in [("tree-c", 0, &c.tc[s]), ("tree-r-last", sh.r_first, &c.tr[s])] {
                let f = sh.tmp_tree(s, kind, c.k);
                let b = TreeBuilder::resume(&f, leaves, first_stored, st).map_err(|e| e.to_string())?;
                let d = digest(&f, &b.written_regions()).map_err(|e| e.to_string())?;
                if d != st.digest {
                    return Err(format!("{} is not what it was at the checkpoint", f.display()));
                }
            }
        }
    }
    Ok(())
}

impl TreeBuilder {
    /// Flush and sync what is written, and say where the tree stands.
    pub(crate) fn checkpoint(&mut self, path: &Path) -> std::io::Result<TreeState> {
        for l in 0..self.offsets.len() {
            self.flush_level(l)?;
        }
        if let Some(f) = &self.file {
            f.sync_data()?;
        }
        Ok(TreeState {
            written: self.written.clone(),
            pending: self.pending.iter().map(|p| p.iter().map(|x| hex::encode(fr_bytes(x))).collect()).collect(),
            digest: digest(path, &self.written_regions())?,
        })
    }

    /// The stored levels' written bytes: (byte offset, nodes).
    pub(crate) fn written_regions(&self) -> Vec<(u64, u64)> {
        (self.first_stored..self.offsets.len()).map(|l| (self.offsets[l], self.written[l] / 32)).collect()
    }

    /// Reopen a tree file a checkpoint described (its size and rows as `new` made them).
    pub(crate) fn resume(path: &Path, leaves: u64, first_stored: usize, st: &TreeState) -> std::io::Result<Self> {
        let b = TreeBuilder::layout(path, leaves, first_stored, false)?;
        b.restore(st).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
    }

    /// This builder in the state `st` describes, when it is one the tree can be in.
    fn restore(mut self, st: &TreeState) -> std::io::Result<Self> {
        let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        if st.written.len() != self.written.len() || st.pending.len() != self.pending.len() {
            return Err(bad("the checkpoint has another number of rows".into()));
        }
        for (l, &w) in st.written.iter().enumerate() {
            let stored = if l >= self.first_stored { self.sizes[l] * 32 } else { 0 };
            if w > stored || !w.is_multiple_of(32) || st.pending[l].len() >= 8 {
                return Err(bad(format!("the checkpoint's row {l} is not a state this tree can be in")));
            }
        }
        self.written = st.written.clone();
        for (level, p) in st.pending.iter().enumerate() {
            for h in p {
                let x = parse_node(h).ok_or_else(|| bad(format!("a pending node is not a field element: {h}")))?;
                self.pending[level].push(x);
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_cover_a_region_ends_included() {
        assert_eq!(samples(0).count(), 0);
        assert_eq!(samples(3).collect::<Vec<_>>(), vec![0, 1, 2, 2]);
        let s: Vec<u64> = samples(1 << 20).collect();
        assert_eq!((s[0], *s.last().unwrap(), s.len()), (0, (1 << 20) - 1, 33));
    }

    #[test]
    fn roots_that_are_not_field_elements_are_refused_not_emptied() {
        assert_eq!(parse_roots(&[vec![hex::encode([1u8; 32])]]).unwrap()[0].len(), 1);
        for bad in [hex::encode([0xffu8; 32]), "00".into(), "zz".into()] {
            let e = parse_roots(&[vec![], vec![bad.clone()]]).unwrap_err();
            assert!(e.contains("sector index 1"), "{bad}: {e}");
        }
    }
}
