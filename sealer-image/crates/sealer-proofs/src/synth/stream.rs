//! The streaming writer of one sector's `syn-porep-vanilla-proofs.dat`: the challenges in
//! chunks, each chunk's records built in parallel from the tree files, the replica and the
//! labels, written at their offsets and dropped. The file's format is filecoin-proofs'
//! (storage-proofs-porep `SynthProofs`): the roots of tree-d, tree-c and tree-r-last, then per
//! synthetic challenge its index and parents, tree-d leaf and path, the columns of the
//! challenge and its 14 parents with their tree-c leaves and paths, the tree-r-last leaf and
//! path. Nothing else of a vanilla proof (labeling and encoding proofs) is in the file, so
//! nothing else is built.
//!
//! Checks instead of filecoin-proofs' second pass over every proof: before, the roots of the
//! trees against comm_d, comm_c, comm_r_last and comm_r; for every challenge, its column hashes
//! to its tree-c leaf, its replica node is its last label plus its data node, and its
//! tree-r-last segment rebuilt from the replica hashes to the stored row above it; for every
//! 64th challenge also its parents' columns against their tree-c leaves and every layer's label
//! recomputed from its parents' labels.
//!
//! Resumable: records go to `<file>.partial`, and after each chunk is on disk (fdatasync) a
//! small `<file>.progress` says how many; a run resumes after the last recorded chunk. The
//! file gets its name only when every record is written and synced.

use super::labels::Labels;
use super::shape::{Shape, TreeFile, NODE};
use anyhow::Context;
use blstrs::Scalar as Fr;
use ff::PrimeField;
use rayon::prelude::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Every `SAMPLE_EVERY`-th challenge also has its parents' columns and its labels checked.
pub const SAMPLE_EVERY: usize = 64;

/// Bytes of records one chunk holds in memory.
const CHUNK_BYTES: usize = 64 << 20;

/// Rebuilt tree-r-last segments are kept for the whole sector when they take at most this.
const SEGMENT_MEMO_BYTES: u64 = 128 << 20;

/// Challenges per chunk of a shape: as many records as [`CHUNK_BYTES`] holds.
fn chunk_challenges(sh: &Shape) -> usize {
    (CHUNK_BYTES / sh.record_bytes()).max(1)
}

/// Segments of tree-r-last a sector has, and bytes of one rebuilt segment's rows.
fn segments(sh: &Shape) -> (u64, u64) {
    let count = sh.trees as u64 * sh.leaves / sh.segment_leaves();
    let bytes = (1..=sh.rows_to_discard).map(|r| sh.segment_leaves() >> (3 * r)).sum::<u64>() * NODE as u64;
    (count, bytes)
}

/// Whether a sector's rebuilt segments are all kept (small sectors: each is used by many
/// challenges).
fn memo_segments(sh: &Shape) -> bool {
    let (count, bytes) = segments(sh);
    count * bytes <= SEGMENT_MEMO_BYTES
}

/// Arity-8 Poseidon hashes a challenge costs on average for its tree-r-last path: a segment's
/// rows and the check of the row above, once per segment when they are kept, else per
/// challenge.
pub fn segment_hashes_per_challenge(sh: &Shape, challenges: u64) -> f64 {
    let per_segment = (1..=sh.rows_to_discard + 1).map(|r| sh.segment_leaves() >> (3 * r)).sum::<u64>() as f64;
    if memo_segments(sh) {
        per_segment * segments(sh).0 as f64 / challenges as f64
    } else {
        per_segment
    }
}

/// The most memory one sector's writer holds, bytes: a chunk's records and columns (with
/// their node list and the slot's page buffer), the kept segments, the tree rows kept in
/// memory, the challenge list, and 16 MiB for the threads' stacks and buffers. The parent
/// graph is a shared read-only map of the node's parent cache (page cache, not counted).
pub fn memory_bound(sh: &Shape) -> u64 {
    let chunk = chunk_challenges(sh) as u64;
    let records = chunk * sh.record_bytes() as u64;
    let columns = chunk * 15 * (sh.layers as u64 * NODE as u64 + 8) + (1 << 20);
    let (count, bytes) = segments(sh);
    let memo = if memo_segments(sh) { count * (bytes + 32) } else { 0 };
    let cached_row = |leaves: u64, bits: u32| {
        let mut total = 0;
        let mut n = leaves;
        while n >= 1 {
            if n <= super::shape::CACHED_ROW_NODES {
                total += n * NODE as u64;
            }
            if n == 1 {
                break;
            }
            n >>= bits;
        }
        total
    };
    let rows = cached_row(sh.nodes, 1) + 2 * sh.trees as u64 * cached_row(sh.leaves, 3);
    let challenges = sh.nodes.min(super::SYNTH_CHALLENGES_MAX) * 8;
    records + columns + memo + rows + challenges + (16 << 20)
}

/// What one sector's synthetic proofs are made from.
pub struct SectorInput<'a> {
    /// The sector's cache directory (trees, p_aux; the file is written there).
    pub cache: &'a Path,
    /// Its replica.
    pub sealed: &'a Path,
    /// Sector size in bytes.
    pub sector_size: u64,
    /// SDR layers.
    pub layers: usize,
    /// Its replica id.
    pub replica_id: [u8; 32],
    /// comm_r and comm_d from PC2.
    pub comm_r: [u8; 32],
    /// See `comm_r`.
    pub comm_d: [u8; 32],
    /// The batch's parent graph.
    pub parents: &'a sealer_graph::Parents,
}

/// What a call of [`write`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Synthetic challenges (records) in the file.
    pub challenges: usize,
    /// Records found on disk from an earlier run and kept.
    pub resumed: usize,
    /// Bytes of the file.
    pub bytes: u64,
}

fn fr(b: &[u8], what: &str) -> anyhow::Result<Fr> {
    let r: [u8; 32] = b[..32].try_into().expect("32 bytes");
    Option::from(Fr::from_repr(r)).with_context(|| format!("{what} is not a field element"))
}

fn column_hash(col: &[u8], layers: usize) -> anyhow::Result<[u8; 32]> {
    let x = col.chunks(NODE).map(|l| fr(l, "a label")).collect::<anyhow::Result<Vec<_>>>()?;
    Ok(sealer_pc2::fr_bytes(&match layers {
        2 => sealer_pc2::poseidon2(x[0], x[1]),
        11 => sealer_pc2::poseidon11(&x),
        n => anyhow::bail!("no column hash for {n} layers"),
    }))
}

/// A sector's trees and replica, opened and checked against its commitments.
struct Trees {
    shape: Shape,
    d: TreeFile,
    c: Vec<TreeFile>,
    r: Vec<TreeFile>,
    roots_c: Vec<[u8; 32]>,
    roots_r: Vec<[u8; 32]>,
    /// 64 GiB: each half's sub-tree root (the top level's nodes).
    halves_c: Vec<[u8; 32]>,
    halves_r: Vec<[u8; 32]>,
    replica: File,
    segments: Option<Vec<OnceLock<Segment>>>,
}

/// tree-r-last rows 1..=rows_to_discard under one node of the first stored row.
type Segment = Vec<Vec<u8>>;

impl Trees {
    fn open(i: &SectorInput) -> anyhow::Result<(Self, [u8; 96])> {
        let shape = Shape::of(i.sector_size, i.layers);
        let t = shape.trees;
        let path = |kind: &str, k: usize| i.cache.join(sealer_pc2::tree_name(kind, k, t));
        let d = TreeFile::open(&i.cache.join("sc-02-data-tree-d.dat"), shape.nodes, 1, 0)?;
        let c = (0..t)
            .map(|k| TreeFile::open(&path("tree-c", k), shape.leaves, 3, 0))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let r = (0..t)
            .map(|k| TreeFile::open(&path("tree-r-last", k), shape.leaves, 3, shape.rows_to_discard + 1))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let roots_c = c.iter().map(TreeFile::root).collect::<std::io::Result<Vec<_>>>()?;
        let roots_r = r.iter().map(TreeFile::root).collect::<std::io::Result<Vec<_>>>()?;
        let p_aux = std::fs::read(i.cache.join("p_aux")).context("reading p_aux")?;
        anyhow::ensure!(p_aux.len() == 64, "p_aux has {} bytes, want 64 (comm_c, comm_r_last)", p_aux.len());
        let (comm_c, comm_r_last) = (fr(&p_aux[..32], "p_aux comm_c")?, fr(&p_aux[32..], "p_aux comm_r_last")?);
        let combine = |roots: &[[u8; 32]], what| -> anyhow::Result<Fr> {
            let frs = roots.iter().map(|x| fr(x, what)).collect::<anyhow::Result<Vec<_>>>()?;
            Ok(sealer_pc2::combine_roots(&frs))
        };
        anyhow::ensure!(
            combine(&roots_c, "a tree-c root")? == comm_c,
            "the tree-c files do not hash to p_aux's comm_c"
        );
        anyhow::ensure!(
            combine(&roots_r, "a tree-r-last root")? == comm_r_last,
            "the tree-r-last files do not hash to p_aux's comm_r_last"
        );
        anyhow::ensure!(
            sealer_pc2::fr_bytes(&sealer_pc2::poseidon2(comm_c, comm_r_last)) == i.comm_r,
            "p_aux's comm_c and comm_r_last do not hash to the comm_r given"
        );
        anyhow::ensure!(d.root()? == i.comm_d, "tree-d's root is not the comm_d given");
        let replica = File::open(i.sealed).with_context(|| format!("opening {}", i.sealed.display()))?;
        anyhow::ensure!(
            replica.metadata()?.len() == i.sector_size,
            "{} is not a whole replica of {} bytes",
            i.sealed.display(),
            i.sector_size
        );
        let halves = |roots: &[[u8; 32]]| -> anyhow::Result<Vec<[u8; 32]>> {
            if t != 16 {
                return Ok(vec![]);
            }
            roots
                .chunks(8)
                .map(|h| {
                    let frs = h.iter().map(|x| fr(x, "a root")).collect::<anyhow::Result<Vec<_>>>()?;
                    Ok(sealer_pc2::fr_bytes(&sealer_pc2::poseidon8(&frs)))
                })
                .collect()
        };
        let segments =
            memo_segments(&shape).then(|| (0..segments(&shape).0).map(|_| OnceLock::new()).collect::<Vec<_>>());
        let mut header = [0u8; 96];
        header[..32].copy_from_slice(&i.comm_d);
        header[32..64].copy_from_slice(&p_aux[..32]);
        header[64..].copy_from_slice(&p_aux[32..]);
        let (halves_c, halves_r) = (halves(&roots_c)?, halves(&roots_r)?);
        Ok((Trees { shape, d, c, r, roots_c, roots_r, halves_c, halves_r, replica, segments }, header))
    }

    /// The sub and top levels of a path in base tree `k`.
    fn put_upper(&self, k: usize, roots: &[[u8; 32]], halves: &[[u8; 32]], w: &mut Out) {
        if self.shape.trees < 8 {
            return;
        }
        let half = k / 8;
        for j in (half * 8..half * 8 + 8).filter(|&j| j != k) {
            w.put(&roots[j]);
        }
        if self.shape.trees == 16 {
            w.put(&halves[1 - half]);
        }
    }

    /// Node `v`'s tree-c leaf and path; returns the leaf.
    fn put_path_c(&self, v: u64, w: &mut Out) -> std::io::Result<[u8; 32]> {
        let (k, l) = ((v / self.shape.leaves) as usize, v % self.shape.leaves);
        let mut leaf = [0u8; 32];
        self.c[k].read(0, l, &mut leaf)?;
        w.put(&leaf);
        let mut group = [0u8; 8 * NODE];
        for level in 0..self.shape.base_levels {
            let idx = l >> (3 * level);
            self.c[k].read(level, idx & !7, &mut group)?;
            put_siblings(&group, idx, w);
        }
        self.put_upper(k, &self.roots_c, &self.halves_c, w);
        Ok(leaf)
    }

    /// Rows 1..=rows_to_discard of base tree `k`'s segment `s`, rebuilt from the replica and
    /// checked against the stored row above.
    fn segment(&self, k: usize, s: u64) -> anyhow::Result<Segment> {
        let w = self.shape.segment_leaves();
        let mut leaves = vec![0u8; w as usize * NODE];
        self.replica.read_exact_at(&mut leaves, (k as u64 * self.shape.leaves + s * w) * NODE as u64)?;
        let mut cur = leaves.chunks(NODE).map(|b| fr(b, "a replica node")).collect::<anyhow::Result<Vec<_>>>()?;
        let mut rows = Vec::with_capacity(self.shape.rows_to_discard);
        for _ in 0..self.shape.rows_to_discard {
            cur = cur.chunks(8).map(sealer_pc2::poseidon8).collect();
            rows.push(cur.iter().flat_map(sealer_pc2::fr_bytes).collect::<Vec<u8>>());
        }
        let mut stored = [0u8; 32];
        self.r[k].read(self.shape.rows_to_discard + 1, s, &mut stored)?;
        anyhow::ensure!(
            sealer_pc2::fr_bytes(&sealer_pc2::poseidon8(&cur)) == stored,
            "the replica under tree-r-last node {s} of base tree {k} does not hash to it (replica or tree-r-last damaged)"
        );
        Ok(rows)
    }

    /// Node `v`'s tree-r-last leaf (the replica's node) and path; returns the leaf.
    fn put_path_r(&self, v: u64, w: &mut Out) -> anyhow::Result<[u8; 32]> {
        let sh = &self.shape;
        let (k, l) = ((v / sh.leaves) as usize, v % sh.leaves);
        let mut group = [0u8; 8 * NODE];
        self.replica.read_exact_at(&mut group, (v & !7) * NODE as u64)?;
        let own = (l & 7) as usize;
        let leaf: [u8; 32] = group[own * NODE..own * NODE + NODE].try_into().expect("32 bytes");
        w.put(&leaf);
        put_siblings(&group, l, w);
        let segs_per_tree = sh.leaves / sh.segment_leaves();
        let s = l / sh.segment_leaves();
        let computed;
        let seg = match &self.segments {
            Some(memo) => {
                let slot = &memo[(k as u64 * segs_per_tree + s) as usize];
                match slot.get() {
                    Some(seg) => seg,
                    None => {
                        let seg = self.segment(k, s)?;
                        let _ = slot.set(seg);
                        slot.get().expect("set")
                    }
                }
            }
            None => {
                computed = self.segment(k, s)?;
                &computed
            }
        };
        for level in 1..sh.base_levels {
            let idx = l >> (3 * level);
            if level <= sh.rows_to_discard {
                let local = (idx - s * (sh.segment_leaves() >> (3 * level))) as usize;
                let start = (local & !7) * NODE;
                put_siblings(&seg[level - 1][start..start + 8 * NODE], idx, w);
            } else {
                self.r[k].read(level, idx & !7, &mut group)?;
                put_siblings(&group, idx, w);
            }
        }
        self.put_upper(k, &self.roots_r, &self.halves_r, w);
        Ok(leaf)
    }
}

/// The 7 nodes of an 8-node group other than `idx`'s own, in order.
fn put_siblings(group: &[u8], idx: u64, w: &mut Out) {
    let own = (idx & 7) as usize;
    for j in (0..8).filter(|&j| j != own) {
        w.put(&group[j * NODE..j * NODE + NODE]);
    }
}

/// A record being written.
struct Out<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Out<'_> {
    fn put(&mut self, b: &[u8]) {
        self.buf[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
}

/// The columns of a chunk's nodes.
struct Columns {
    nodes: Vec<u64>,
    data: Vec<u8>,
    width: usize,
}

impl Columns {
    fn get(&self, v: u64) -> &[u8] {
        let i = self.nodes.binary_search(&v).expect("every node of the chunk was read");
        &self.data[i * self.width..(i + 1) * self.width]
    }
}

/// One challenge's record into `rec` (exactly its size), with the checks the module names.
fn record(t: &Trees, i: &SectorInput, index: usize, c: u64, cols: &Columns, rec: &mut [u8]) -> anyhow::Result<()> {
    let sh = &t.shape;
    let parents = i.parents.get(c);
    let mut w = Out { buf: rec, at: 0 };
    w.put(&c.to_le_bytes());
    for &p in &parents {
        w.put(&(p as u64).to_le_bytes());
    }
    let mut data = [0u8; 32];
    t.d.read(0, c, &mut data)?;
    w.put(&data);
    let mut sib = [0u8; 32];
    for level in 0..sh.path_d_len() {
        t.d.read(level, (c >> level) ^ 1, &mut sib)?;
        w.put(&sib);
    }
    let sample = index.is_multiple_of(SAMPLE_EVERY);
    for (j, v) in std::iter::once(c).chain(parents.iter().map(|&p| p as u64)).enumerate() {
        let col = cols.get(v);
        w.put(col);
        let leaf = t.put_path_c(v, &mut w)?;
        if (j == 0 || sample) && column_hash(col, sh.layers)? != leaf {
            anyhow::bail!("node {v}: its labels do not hash to its tree-c leaf (labels or tree-c damaged)");
        }
    }
    let replica = t.put_path_r(c, &mut w)?;
    debug_assert_eq!(w.at, rec.len(), "record size");
    let col = cols.get(c);
    let last = fr(&col[(sh.layers - 1) * NODE..], "a label")?;
    anyhow::ensure!(
        sealer_pc2::fr_bytes(&(last + fr(&data, "a data node")?)) == replica,
        "node {c}: the replica is not its last label plus its data (replica damaged)"
    );
    if sample {
        let mut buf = [0u8; sealer_graph::DEGREE * NODE];
        for layer in 1..=sh.layers {
            for (n, &p) in parents.iter().enumerate() {
                let from = if n < sealer_hash::BASE_DEGREE || layer == 1 { layer } else { layer - 1 };
                let label = &cols.get(p as u64)[(from - 1) * NODE..from * NODE];
                buf[n * NODE..(n + 1) * NODE].copy_from_slice(label);
            }
            let want = sealer_hash::reference_label(&i.replica_id, layer as u32, c, &buf);
            anyhow::ensure!(
                want[..] == col[(layer - 1) * NODE..layer * NODE],
                "node {c}: its layer-{layer} label is not the hash of its parents' (labels damaged)"
            );
        }
    }
    Ok(())
}

/// Records on disk from an earlier run, and what they were written for.
#[derive(serde::Serialize, serde::Deserialize, PartialEq, Eq, Debug)]
struct Checkpoint {
    records: usize,
    record_bytes: usize,
    challenges: usize,
    comm_r: String,
}

fn side(out: &Path, ext: &str) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

/// The paths a run writes besides `out`: the partial file and its checkpoint.
pub fn partial_paths(out: &Path) -> [PathBuf; 2] {
    [side(out, ".partial"), side(out, ".progress")]
}

/// What a chunk's end tells the caller: records done and of how many. An error stops the run
/// there (what is on disk stays, for the next run to resume).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize) -> anyhow::Result<()>;

/// Write the sector's synthetic proofs to `out`, reading labels from `labels`; `progress` is
/// told the records done after each chunk. Resumes a run killed before it finished.
pub fn write(i: &SectorInput, labels: &mut dyn Labels, out: &Path, progress: Progress) -> anyhow::Result<Written> {
    let sh = Shape::of(i.sector_size, i.layers);
    write_in_chunks(i, labels, out, chunk_challenges(&sh), progress)
}

/// [`write`] with `chunk` challenges per chunk (tests choose small ones).
pub fn write_in_chunks(
    i: &SectorInput,
    labels: &mut dyn Labels,
    out: &Path,
    chunk: usize,
    progress: Progress,
) -> anyhow::Result<Written> {
    let (trees, header) = Trees::open(i)?;
    let sh = trees.shape;
    let challenges = super::challenges::synthetic(sh.nodes, &i.replica_id, &i.comm_r);
    let rb = sh.record_bytes();
    let [partial, ckpt_path] = partial_paths(out);
    let want =
        |records| Checkpoint { records, record_bytes: rb, challenges: challenges.len(), comm_r: hex::encode(i.comm_r) };
    let kept = std::fs::read(&ckpt_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Checkpoint>(&b).ok())
        .filter(|c| *c == want(c.records) && c.records <= challenges.len())
        .filter(|c| std::fs::metadata(&partial).is_ok_and(|m| m.len() >= 96 + (c.records * rb) as u64))
        .map_or(0, |c| c.records);
    let file = if kept > 0 {
        let f = std::fs::OpenOptions::new().write(true).open(&partial)?;
        f.set_len(96 + (kept * rb) as u64)?;
        f
    } else {
        let _ = std::fs::remove_file(&ckpt_path);
        let f = File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
        sealer_storage::durable::track(&partial);
        f.write_all_at(&header, 0)?;
        f
    };
    let chunk = chunk.max(1);
    let mut buf = Vec::new();
    let mut done = kept;
    while done < challenges.len() {
        let range = done..(done + chunk).min(challenges.len());
        let mut nodes: Vec<u64> = challenges[range.clone()]
            .iter()
            .flat_map(|&c| std::iter::once(c).chain(i.parents.get(c).map(u64::from)))
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        let data = labels.columns(&nodes)?;
        let cols = Columns { nodes, data, width: sh.layers * NODE };
        buf.resize(range.len() * rb, 0);
        buf.par_chunks_mut(rb).zip(range.clone()).try_for_each(|(rec, n)| {
            record(&trees, i, n, challenges[n], &cols, rec).with_context(|| format!("synthetic challenge {n}"))
        })?;
        file.write_all_at(&buf, 96 + (range.start * rb) as u64)?;
        file.sync_data()?;
        sealer_storage::durable::synced(&partial);
        done = range.end;
        sealer_storage::durable::replace(&ckpt_path, &serde_json::to_vec(&want(done))?)?;
        progress(done, challenges.len())?;
    }
    file.sync_all()?;
    sealer_storage::durable::synced(&partial);
    sealer_storage::durable::rename(&partial, out).with_context(|| format!("naming {}", out.display()))?;
    let _ = std::fs::remove_file(&ckpt_path);
    Ok(Written { challenges: challenges.len(), resumed: kept, bytes: 96 + (challenges.len() * rb) as u64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory per sector stays far below 1 GiB at every size (37 GB with filecoin-proofs at
    /// 32 GiB), and small sectors keep their segments.
    #[test]
    fn memory_is_bounded_at_every_size() {
        for (size, layers) in [(2048u64, 2), (8 << 20, 2), (512 << 20, 2), (32 << 30, 11), (64 << 30, 11)] {
            let sh = Shape::of(size, layers);
            let m = memory_bound(&sh);
            assert!(m < 256 << 20, "{size}: {m} bytes");
            assert_eq!(memo_segments(&sh), size <= 512 << 20, "{size}");
        }
        // 32 GiB rebuilds 64 + 8 nodes of a segment and checks the stored one above per challenge.
        assert_eq!(segment_hashes_per_challenge(&Shape::of(32 << 30, 11), 1 << 18), 73.0);
        // 8 MiB: 512 segments of 73 hashes for 2^18 challenges.
        assert!(
            (segment_hashes_per_challenge(&Shape::of(8 << 20, 2), 1 << 18) - 512.0 * 73.0 / 262_144.0).abs() < 1e-9
        );
    }
}
