//! Deal data for the sealer.
//!
//! A data sector carries its staged unsealed file (fr32-padded, as filecoin-proofs'
//! `add_piece` writes it) and the pieces it holds. Before PC1 touches the slot:
//! * [`resolve_comm_ds`] computes each data sector's comm_d from its pieces with
//!   filecoin-proofs' `compute_comm_d` (alignment padding between pieces implied) and refuses
//!   one that differs from a comm_d the config gives;
//! * [`check_data`] reads each staged file and refuses one whose tree-d root is not that
//!   comm_d, or whose nodes are not field elements (not fr32-padded).
//!
//! In PC2, [`DataFile`] reads the nodes that are added to the key (replica = key + data) and
//! [`write_tree_d`] writes tree-d from the data (or the constant CC tree).

#![warn(missing_docs)]

use rayon::prelude::*;
use sealer_config::{BatchConfig, Piece, SectorSpec};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// What is wrong with a data sector, and whose fault it is.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The input is malformed (a file longer than the sector, pieces filecoin-proofs refuses):
    /// fix it (exit 2).
    #[error("{0}")]
    Input(String),
    /// The sector's file, pieces and comm_d disagree: the file does not hold the pieces, is
    /// not fr32-padded, or the comm_d is not the pieces' (exit 7).
    #[error("{0}")]
    Mismatch(String),
    /// The file could not be read (exit 3).
    #[error("{0}")]
    Io(String),
}

/// Each class is the sealer error of the same name (exit 2, 7 or 3).
impl From<DataError> for sealer_error::SealerError {
    fn from(e: DataError) -> Self {
        match e {
            DataError::Input(m) => sealer_error::SealerError::Input(m),
            DataError::Mismatch(m) => sealer_error::SealerError::DataMismatch(m),
            DataError::Io(m) => sealer_error::SealerError::Io(m),
        }
    }
}

/// The pieces followed by the zero filler pieces lotus adds after them to fill the sector, as
/// filecoin-proofs `PieceInfo`s (what its `seal_pre_commit_phase1` and C1 take).
pub fn piece_infos(sector_size: u64, pieces: &[Piece]) -> Result<Vec<filecoin_proofs::PieceInfo>, String> {
    use filecoin_proofs::{PaddedBytesAmount, PieceInfo, UnpaddedBytesAmount};
    let mut all = pieces.to_vec();
    let mut end = pieces.iter().fold(0u64, |end, p| end.div_ceil(p.size) * p.size + p.size);
    while end > 0 && end < sector_size {
        // The largest zero piece that starts aligned here: the lowest set bit of the offset.
        let fill = 1u64 << end.trailing_zeros();
        all.push(Piece { comm_p: sealer_hash::cc_comm_d(fill), size: fill });
        end += fill;
    }
    all.iter()
        .map(|p| PieceInfo::new(p.comm_p, UnpaddedBytesAmount::from(PaddedBytesAmount(p.size))))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{e:#}"))
}

/// comm_d of a sector holding `pieces` in order, the rest zero: filecoin-proofs'
/// `compute_comm_d` over the pieces and their fillers ([`piece_infos`]); without the fillers
/// it returns the root of the pieces' span, not of the sector, when they do not fill it.
pub fn pieces_comm_d(sector_size: u64, pieces: &[Piece]) -> Result<[u8; 32], String> {
    let infos = piece_infos(sector_size, pieces)?;
    filecoin_proofs::compute_comm_d(filecoin_proofs::SectorSize(sector_size), &infos).map_err(|e| format!("{e:#}"))
}

/// Fill in every data sector's comm_d from its pieces; refuse one whose given comm_d differs
/// (naming the sector and both values). CC sectors are left as they are.
pub fn resolve_comm_ds(cfg: &mut BatchConfig) -> Result<(), DataError> {
    let size = cfg.sector_size;
    for (i, s) in cfg.sectors.iter_mut().enumerate() {
        let Some(d) = &s.data else { continue };
        let from_pieces = pieces_comm_d(size, &d.pieces)
            .map_err(|e| DataError::Input(format!("sectors[{i}].data.pieces: sector {}: {e}", s.sector_id)))?;
        match s.comm_d {
            Some(given) if given != from_pieces => {
                return Err(DataError::Mismatch(format!(
                    "sectors[{i}].comm_d: sector {} gives comm_d {} but its pieces make {}: fix the piece list or the comm_d",
                    s.sector_id,
                    hex::encode(given),
                    hex::encode(from_pieces)
                )))
            }
            _ => s.comm_d = Some(from_pieces),
        }
    }
    Ok(())
}

/// A data sector's staged file, read node by node (zero beyond its end, as filecoin-proofs
/// extends a short file).
pub struct DataFile {
    file: File,
    len: u64,
    path: std::path::PathBuf,
}

impl DataFile {
    /// Open `sector`'s staged file; refuse one longer than the sector.
    pub fn open(sector: &SectorSpec, sector_size: u64) -> Result<Self, DataError> {
        let d = sector.data.as_ref().ok_or_else(|| DataError::Input(format!("sector {} is CC", sector.sector_id)))?;
        let file = File::open(&d.path).map_err(|e| {
            DataError::Io(format!("sector {}: opening its data {}: {e}", sector.sector_id, d.path.display()))
        })?;
        let len = file
            .metadata()
            .map_err(|e| DataError::Io(format!("sector {}: {}: {e}", sector.sector_id, d.path.display())))?
            .len();
        if len > sector_size {
            return Err(DataError::Input(format!(
                "sector {}: its data {} is {len} bytes, longer than the {sector_size}-byte sector: give the staged (padded) sector file",
                sector.sector_id,
                d.path.display()
            )));
        }
        Ok(DataFile { file, len, path: d.path.clone() })
    }

    /// Why reading or using node `node` of the file failed, naming the file and the fix (the
    /// file was checked before PC1, so it changed or its device failed since).
    pub fn read_failed(&self, node: u64, e: impl std::fmt::Display) -> String {
        format!(
            "its data {} failed at node {node} during PC2: {e}; the staged file changed or its device failed during the batch: stage it again and seal it in another batch",
            self.path.display()
        )
    }

    /// Read nodes `[v, v + buf.len() / 32)` into `buf`.
    pub fn read_nodes(&self, v: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let off = v * 32;
        let have = self.len.saturating_sub(off).min(buf.len() as u64) as usize;
        self.file.read_exact_at(&mut buf[..have], off)?;
        buf[have..].fill(0);
        Ok(())
    }
}

/// Nodes per chunk of tree-d work (1 MiB of data).
const CHUNK: u64 = 1 << 15;

fn hash_pair(a: &[u8], b: &[u8]) -> [u8; 32] {
    let mut buf = [0u8; 64];
    buf[..32].copy_from_slice(a);
    buf[32..].copy_from_slice(b);
    let mut h = sealer_hash::sha256(&buf);
    h[31] &= 0x3f;
    h
}

/// Streaming tree-d over `nodes` leaves: the binary SHA-256 tree (trimmed to 254 bits) that
/// rust-fil-proofs stores whole, level 0 (the data) first. Chunks of a power-of-two size
/// arrive in order; the levels inside a chunk are hashed at once, the few above it carried.
struct TreeD<'a> {
    out: Option<&'a File>,
    offsets: Vec<u64>,
    /// Per level above the chunks: the left child waiting for its sibling.
    pending: Vec<Option<[u8; 32]>>,
    /// Per level: nodes carried up to it so far (its next index).
    carried: Vec<u64>,
    root: Option<[u8; 32]>,
}

impl<'a> TreeD<'a> {
    fn new(nodes: u64, out: Option<&'a File>) -> Self {
        let mut offsets = Vec::new();
        let (mut off, mut n) = (0u64, nodes);
        loop {
            offsets.push(off);
            off += n * 32;
            if n == 1 {
                break;
            }
            n /= 2;
        }
        let levels = offsets.len();
        TreeD { out, offsets, pending: vec![None; levels], carried: vec![0; levels], root: None }
    }

    fn bytes(&self) -> u64 {
        self.offsets[self.offsets.len() - 1] + 32
    }

    fn write(&self, level: usize, index: u64, bytes: &[u8]) -> std::io::Result<()> {
        match self.out {
            Some(f) => f.write_all_at(bytes, self.offsets[level] + index * 32),
            None => Ok(()),
        }
    }

    /// Add the nodes `[v, v + chunk.len() / 32)` of level 0; every chunk has the same
    /// power-of-two length and they arrive in order.
    fn add_chunk(&mut self, v: u64, chunk: &[u8]) -> std::io::Result<()> {
        self.write(0, v, chunk)?;
        let (mut level, mut index) = (0, v);
        let mut row = std::borrow::Cow::Borrowed(chunk);
        while row.len() > 32 {
            let next: Vec<u8> = row.chunks_exact(64).flat_map(|p| hash_pair(&p[..32], &p[32..])).collect();
            level += 1;
            index /= 2;
            self.write(level, index, &next)?;
            row = std::borrow::Cow::Owned(next);
        }
        self.carried[level] = index + 1;
        self.carry(level, row[..32].try_into().expect("one node"))
    }

    /// Carry a finished subtree root (already written) up the levels above the chunks.
    fn carry(&mut self, level: usize, node: [u8; 32]) -> std::io::Result<()> {
        if level + 1 == self.offsets.len() {
            self.root = Some(node);
            return Ok(());
        }
        match self.pending[level].take() {
            None => self.pending[level] = Some(node),
            Some(left) => {
                let up = hash_pair(&left, &node);
                let index = self.carried[level + 1];
                self.carried[level + 1] += 1;
                self.write(level + 1, index, &up)?;
                self.carry(level + 1, up)?;
            }
        }
        Ok(())
    }
}

/// Build tree-d over `nodes` leaves read by `read(v, buf)`, writing the whole tree to `out`
/// when given; returns its root (comm_d). `check` sees every chunk of data first.
fn tree_d(
    nodes: u64,
    out: Option<&File>,
    mut read: impl FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    mut check: impl FnMut(u64, &[u8]) -> Result<(), DataError>,
) -> Result<[u8; 32], DataError> {
    let io = |e: std::io::Error| DataError::Io(format!("tree-d: {e}"));
    let chunk = CHUNK.min(nodes);
    let mut t = TreeD::new(nodes, out);
    if let Some(f) = out {
        f.set_len(t.bytes()).map_err(io)?;
    }
    let mut buf = vec![0u8; (chunk * 32) as usize];
    let mut v = 0;
    while v < nodes {
        read(v, &mut buf).map_err(io)?;
        check(v, &buf)?;
        t.add_chunk(v, &buf).map_err(io)?;
        v += chunk;
    }
    Ok(t.root.expect("tree complete"))
}

/// The first node of `buf` (whose first node is `v`) that is not a field element, if any:
/// fr32-padded data has the two top bits of every node's last byte clear.
fn first_non_field(v: u64, buf: &[u8]) -> Option<u64> {
    buf.chunks_exact(32).position(|n| n[31] & 0xc0 != 0).map(|i| v + i as u64)
}

/// Read one data sector's staged file and check it is what its pieces say: every node a field
/// element, and its tree-d root equal to the sector's (resolved) comm_d. Reads the whole file.
pub fn check_sector(sector: &SectorSpec, sector_size: u64) -> Result<(), DataError> {
    let f = DataFile::open(sector, sector_size)?;
    let path = &sector.data.as_ref().expect("data sector").path;
    let want = sector.comm_d.expect("comm_d resolved from the pieces");
    let root = tree_d(
        sector_size / 32,
        None,
        |v, b| f.read_nodes(v, b),
        |v, b| {
            match first_non_field(v, b) {
            Some(n) => Err(DataError::Mismatch(format!(
                "sector {}: node {n} of its data {} is not a field element: give the fr32-padded staged file (as add_piece writes it), not the raw piece bytes",
                sector.sector_id,
                path.display()
            ))),
            None => Ok(()),
        }
        },
    )?;
    if root != want {
        return Err(DataError::Mismatch(format!(
            "sector {}: its data {} has comm_d {} (tree-d root) but its pieces make {}: the file does not hold those pieces",
            sector.sector_id,
            path.display(),
            hex::encode(root),
            hex::encode(want)
        )));
    }
    Ok(())
}

/// [`check_sector`] for every data sector of the batch, in parallel; the first failure in
/// sector order is returned.
pub fn check_data(cfg: &BatchConfig) -> Result<usize, DataError> {
    let results: Vec<Result<(), DataError>> =
        cfg.sectors.par_iter().filter(|s| s.data.is_some()).map(|s| check_sector(s, cfg.sector_size)).collect();
    let n = results.len();
    results.into_iter().collect::<Result<Vec<()>, _>>()?;
    Ok(n)
}

/// One sector a batch goes on without: its number, the class of the problem (the sealer's
/// exit name: `input`, `data-mismatch`, `io`, or `audit`: outputs that failed the audit before
/// handoff) and why, naming the file and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectorFailure {
    /// The sector's number.
    pub sector_id: u64,
    /// `input`, `data-mismatch`, `io` or `audit`.
    pub class: &'static str,
    /// What is wrong and how to fix it.
    pub reason: String,
}

impl SectorFailure {
    /// The classes a failure may have, as the sealer's exit names spell them.
    pub const CLASSES: [&'static str; 4] = ["input", "data-mismatch", "io", "audit"];

    /// The class named `name`, when it is one of [`SectorFailure::CLASSES`].
    pub fn class_named(name: &str) -> Option<&'static str> {
        Self::CLASSES.into_iter().find(|c| *c == name)
    }

    /// The failure of sector `sector_id`: `reason` gets the sector's number in front unless it
    /// starts with it.
    pub fn new(sector_id: u64, class: &'static str, reason: impl std::fmt::Display) -> Self {
        let reason = reason.to_string();
        let prefix = format!("sector {sector_id}: ");
        let reason = if reason.starts_with(&prefix) { reason } else { prefix + &reason };
        SectorFailure { sector_id, class, reason }
    }

    /// The failure of sector `sector_id` for the sealer error `e`: its class is the error's
    /// (`input`, `data-mismatch`, `audit` for outputs that are not what they should be; any
    /// other is `io`).
    pub fn of_error(sector_id: u64, e: &sealer_error::SealerError) -> Self {
        let class = match e {
            sealer_error::SealerError::Input(_) => "input",
            sealer_error::SealerError::DataMismatch(_) => "data-mismatch",
            sealer_error::SealerError::VerifyMismatch(_) => "audit",
            _ => "io",
        };
        Self::new(sector_id, class, e.message())
    }

    /// The failure of sector `sector_id` for `e`, classed as the error is.
    pub fn of(sector_id: u64, e: DataError) -> Self {
        let (class, reason) = match e {
            DataError::Input(m) => ("input", m),
            DataError::Mismatch(m) => ("data-mismatch", m),
            DataError::Io(m) => ("io", m),
        };
        SectorFailure { sector_id, class, reason }
    }
}

/// The error of a batch none of whose sectors is left: `what` says at which step ("every
/// sector of the update failed"), then every sector's reason; its class is the first
/// failure's (exit 2, 7, 5 for `audit`, or 3).
pub fn all_failed(what: &str, failed: &[SectorFailure]) -> sealer_error::SealerError {
    let reasons: Vec<&str> = failed.iter().map(|f| f.reason.as_str()).collect();
    let msg = format!("{what}: {}", reasons.join("; "));
    match failed.first().map(|f| f.class) {
        Some("data-mismatch") => sealer_error::SealerError::DataMismatch(msg),
        Some("input") => sealer_error::SealerError::Input(msg),
        Some("audit") => sealer_error::SealerError::VerifyMismatch(msg),
        _ => sealer_error::SealerError::Io(msg),
    }
}

/// Every check that can fail for one sector alone, run before PC1 labels anything, so that one
/// bad sector costs only itself: a data sector's pieces, its given comm_d against them, and
/// (with `files`) its staged file (missing, longer than the sector, not fr32-padded, not
/// holding its pieces); every sector's output directory must be writable. Good data sectors
/// get their comm_d; the failures come back in sector order, and the batch decides what to do
/// with them.
pub fn triage(cfg: &mut BatchConfig, files: bool) -> Vec<SectorFailure> {
    let size = cfg.sector_size;
    let mut failed = Vec::new();
    for (i, s) in cfg.sectors.iter_mut().enumerate() {
        let Some(d) = &s.data else { continue };
        match pieces_comm_d(size, &d.pieces) {
            Err(e) => failed.push(SectorFailure::of(
                s.sector_id,
                DataError::Input(format!("sectors[{i}].data.pieces: sector {}: {e}: fix its piece list", s.sector_id)),
            )),
            Ok(from_pieces) if s.comm_d.is_some_and(|given| given != from_pieces) => {
                failed.push(SectorFailure::of(
                    s.sector_id,
                    DataError::Mismatch(format!(
                        "sectors[{i}].comm_d: sector {} gives comm_d {} but its pieces make {}: fix the piece list or the comm_d",
                        s.sector_id,
                        hex::encode(s.comm_d.unwrap_or_default()),
                        hex::encode(from_pieces)
                    )),
                ))
            }
            Ok(from_pieces) => s.comm_d = Some(from_pieces),
        }
    }
    let bad = |id: u64, failed: &[SectorFailure]| failed.iter().any(|f| f.sector_id == id);
    if files {
        let checked: Vec<(u64, Result<(), DataError>)> = cfg
            .sectors
            .par_iter()
            .filter(|s| s.data.is_some() && !bad(s.sector_id, &failed))
            .map(|s| (s.sector_id, check_sector(s, size)))
            .collect();
        failed.extend(checked.into_iter().filter_map(|(id, r)| r.err().map(|e| SectorFailure::of(id, e))));
    }
    for s in &cfg.sectors {
        if !bad(s.sector_id, &failed) {
            if let Err(e) = writable_outputs(cfg, s.sector_id) {
                failed.push(SectorFailure::of(s.sector_id, e));
            }
        }
    }
    let order: Vec<u64> = cfg.sectors.iter().map(|s| s.sector_id).collect();
    failed.sort_by_key(|f| order.iter().position(|&id| id == f.sector_id));
    failed
}

/// The sector's output directories exist (or can be made) and take a file.
fn writable_outputs(cfg: &BatchConfig, sector_id: u64) -> Result<(), DataError> {
    let p = sealer_config::sector_paths(cfg, sector_id);
    for dir in [Some(p.cache.as_path()), p.sealed.parent()].into_iter().flatten() {
        let probe = dir.join(".sealfleet-write-probe");
        let r = std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&probe, b""))
            .and_then(|_| std::fs::remove_file(&probe));
        if let Err(e) = r {
            return Err(DataError::Io(format!(
                "sector {sector_id}: its output directory {} is not writable ({e}): fix the output volume's permissions or free space",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Write a sector's tree-d file (`sc-02-data-tree-d.dat` format) to `path` and return its
/// root: from its data for a data sector, the constant all-zero tree for a CC one.
pub fn write_tree_d(sector: &SectorSpec, sector_size: u64, path: &Path) -> Result<[u8; 32], DataError> {
    let out = File::create(path).map_err(|e| DataError::Io(format!("creating {}: {e}", path.display())))?;
    sealer_storage::durable::track(path);
    let nodes = sector_size / 32;
    let root = match &sector.data {
        Some(_) => {
            let f = DataFile::open(sector, sector_size)?;
            tree_d(nodes, Some(&out), |v, b| f.read_nodes(v, b), |_, _| Ok(()))?
        }
        None => write_cc_tree_d(&out, nodes).map_err(|e| DataError::Io(format!("writing {}: {e}", path.display())))?,
    };
    sealer_storage::durable::crash_point("tree-d.written");
    out.sync_all().map_err(|e| DataError::Io(format!("syncing {}: {e}", path.display())))?;
    sealer_storage::durable::synced(path);
    Ok(root)
}

/// The CC tree-d: level k holds `nodes >> k` copies of Z_k (no hashing per node).
fn write_cc_tree_d(out: &File, nodes: u64) -> std::io::Result<[u8; 32]> {
    let mut z = [0u8; 32];
    let (mut n, mut off) = (nodes, 0u64);
    loop {
        let row: Vec<u8> = z.iter().copied().cycle().take(32 * n.min(4096) as usize).collect();
        let mut left = n;
        while left > 0 {
            let c = left.min(4096);
            out.write_all_at(&row[..32 * c as usize], off)?;
            off += 32 * c;
            left -= c;
        }
        if n == 1 {
            return Ok(z);
        }
        z = hash_pair(&z, &z);
        n /= 2;
    }
}

/// Stage raw piece files into a sector file the way lotus does before sealing: each piece
/// zero-padded to the next valid size (127·2^k bytes), fr32-padded and aligned by
/// filecoin-proofs' `add_piece`, the rest of the sector zero. Returns the piece
/// list for the sector's `data.pieces`.
pub fn stage(sector_size: u64, raw_pieces: &[&Path], out: &Path) -> Result<Vec<Piece>, DataError> {
    use filecoin_proofs::{PaddedBytesAmount, UnpaddedBytesAmount};
    use std::io::Read;
    let target = File::create(out).map_err(|e| DataError::Io(format!("creating {}: {e}", out.display())))?;
    let mut lengths: Vec<UnpaddedBytesAmount> = Vec::new();
    let mut pieces = Vec::new();
    for p in raw_pieces {
        let src = File::open(p).map_err(|e| DataError::Io(format!("opening piece {}: {e}", p.display())))?;
        let len = src.metadata().map_err(|e| DataError::Io(format!("{}: {e}", p.display())))?.len();
        let mut unpadded = 127u64;
        while unpadded < len {
            unpadded *= 2;
        }
        let reader = src.take(len).chain(std::io::repeat(0).take(unpadded - len));
        // add_piece (what lotus' WriteWithAlignment calls) writes the alignment padding that
        // write_and_preprocess leaves to the caller.
        #[allow(deprecated)]
        let (info, _) = filecoin_proofs::add_piece(reader, &target, UnpaddedBytesAmount(unpadded), &lengths)
            .map_err(|e| DataError::Input(format!("piece {}: {e:#}", p.display())))?;
        lengths.push(UnpaddedBytesAmount(unpadded));
        pieces.push(Piece { comm_p: info.commitment, size: PaddedBytesAmount::from(info.size).0 });
    }
    let written = target.metadata().map_err(|e| DataError::Io(format!("{}: {e}", out.display())))?.len();
    if written > sector_size {
        return Err(DataError::Input(format!(
            "the pieces need {written} bytes with padding and alignment; a sector holds {sector_size}"
        )));
    }
    target.set_len(sector_size).map_err(|e| DataError::Io(format!("sizing {}: {e}", out.display())))?;
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngCore, SeedableRng};
    use sealer_config::SectorData;

    fn sector(path: &Path, pieces: Vec<Piece>) -> SectorSpec {
        SectorSpec {
            prover_id: [0; 32],
            sector_id: 7,
            ticket: [1; 32],
            comm_d: None,
            data: Some(SectorData { path: path.to_path_buf(), pieces }),
        }
    }

    fn resolved(mut s: SectorSpec, size: u64) -> Result<SectorSpec, String> {
        let cd = pieces_comm_d(size, &s.data.as_ref().unwrap().pieces)?;
        s.comm_d = Some(cd);
        Ok(s)
    }

    #[test]
    fn cc_tree_equals_the_tree_of_zero_data() {
        // 2 KiB (one chunk) and 8 MiB (eight chunks carried up).
        for size in [2048u64, 8 << 20] {
            let dir = tempfile::tempdir().unwrap();
            let zeros = dir.path().join("zeros");
            File::create(&zeros).unwrap().set_len(size).unwrap();
            let cc = SectorSpec { data: None, ..sector(&zeros, vec![]) };
            let data = sector(&zeros, vec![]);
            let (a, b) = (dir.path().join("cc"), dir.path().join("data"));
            assert_eq!(write_tree_d(&cc, size, &a).unwrap(), sealer_hash::cc_comm_d(size));
            assert_eq!(write_tree_d(&data, size, &b).unwrap(), sealer_hash::cc_comm_d(size));
            let (fa, fb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
            assert_eq!(fa.len() as u64, (2 * size / 32 - 1) * 32);
            assert!(fa == fb, "tree-d files differ at size {size}");
        }
    }

    #[test]
    fn staged_pieces_pass_and_every_kind_of_bad_data_is_refused() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let size = 8u64 << 20;
        let dir = tempfile::tempdir().unwrap();
        let raw = |name: &str, len: usize, rng: &mut rand_chacha::ChaCha8Rng| {
            let p = dir.path().join(name);
            let mut b = vec![0u8; len];
            rng.fill_bytes(&mut b);
            std::fs::write(&p, b).unwrap();
            p
        };
        // One piece filling the sector; three pieces of odd sizes with alignment between them.
        let full = raw("full", (size / 128 * 127) as usize, &mut rng);
        let (a, b, c) = (raw("a", 1000, &mut rng), raw("b", 300_000, &mut rng), raw("c", 5000, &mut rng));
        for (name, pieces) in [("one", vec![full.as_path()]), ("three", vec![a.as_path(), b.as_path(), c.as_path()])] {
            let staged = dir.path().join(name);
            let list = stage(size, &pieces, &staged).unwrap();
            assert_eq!(list.len(), pieces.len());
            assert_eq!(std::fs::metadata(&staged).unwrap().len(), size);
            let s = resolved(sector(&staged, list.clone()), size).unwrap();
            check_sector(&s, size).unwrap_or_else(|e| panic!("{name}: {e}"));
            // tree-d's root is the pieces' comm_d; with one full piece that is its comm_p.
            let t = dir.path().join(format!("{name}.tree-d"));
            assert_eq!(write_tree_d(&s, size, &t).unwrap(), s.comm_d.unwrap());
            if list.len() == 1 {
                assert_eq!(s.comm_d.unwrap(), list[0].comm_p);
            }
            // The pieces in another order, or one missing, make another comm_d: refused.
            let mut other = list.clone();
            if other.len() > 1 {
                other.swap(0, 2);
            } else {
                other[0].size /= 2;
            }
            let wrong = resolved(sector(&staged, other), size).unwrap();
            let e = check_sector(&wrong, size).unwrap_err();
            assert!(matches!(e, DataError::Mismatch(_)) && e.to_string().contains("does not hold those pieces"), "{e}");
            // One flipped bit in the data (still a field element): refused.
            let mut bytes = std::fs::read(&staged).unwrap();
            let at = rng.gen_range(0..bytes.len() / 32) * 32 + 3;
            bytes[at] ^= 1;
            let bad = dir.path().join(format!("{name}.flipped"));
            std::fs::write(&bad, &bytes).unwrap();
            assert!(check_sector(&resolved(sector(&bad, list.clone()), size).unwrap(), size).is_err());
        }
        // Raw bytes (not fr32-padded) are refused as such, naming a node.
        let raw_sector = raw("raw", size as usize, &mut rng);
        let list = stage(size, &[full.as_path()], &dir.path().join("again")).unwrap();
        let e = check_sector(&resolved(sector(&raw_sector, list.clone()), size).unwrap(), size).unwrap_err();
        assert!(e.to_string().contains("not a field element"), "{e}");
        // A file longer than the sector is refused before it is read.
        let long = raw("long", size as usize + 32, &mut rng);
        let e = check_sector(&resolved(sector(&long, list), size).unwrap(), size).unwrap_err();
        assert!(e.to_string().contains("longer than"), "{e}");
    }

    #[test]
    fn a_given_comm_d_must_equal_the_pieces() {
        let pieces = vec![Piece { comm_p: [3; 32], size: 2048 }];
        let want = pieces_comm_d(2048, &pieces).unwrap();
        assert_eq!(want, [3; 32], "one piece filling the sector is the sector");
        // A piece that fills half the sector: the zero half is implied, as lotus' filler pieces make it.
        let half = vec![Piece { comm_p: [3; 32], size: 1024 }];
        let filler = Piece { comm_p: sealer_hash::cc_comm_d(1024), size: 1024 };
        let with_filler = pieces_comm_d(2048, &[half[0].clone(), filler]).unwrap();
        assert_eq!(pieces_comm_d(2048, &half).unwrap(), with_filler);
        assert_ne!(with_filler, [3; 32]);
        let mut cfg_sector = sector(Path::new("/d"), pieces);
        cfg_sector.comm_d = Some([4; 32]);
        let mut cfg = test_config(vec![cfg_sector.clone()]);
        let e = resolve_comm_ds(&mut cfg).unwrap_err();
        assert!(e.to_string().contains("sectors[0].comm_d") && e.to_string().contains(&hex::encode(want)), "{e}");
        cfg_sector.comm_d = None;
        let mut cfg = test_config(vec![cfg_sector]);
        resolve_comm_ds(&mut cfg).unwrap();
        assert_eq!(cfg.sectors[0].comm_d, Some(want));
    }

    fn test_config(sectors: Vec<SectorSpec>) -> BatchConfig {
        let v = serde_json::json!({
            "sector_size": 2048, "porep_id": hex::encode(sealer_config::porep_id_for(5)), "api_version": "1.1.0",
            "features": [], "sectors": [{"prover_id": "00".repeat(32), "sector_id": 7, "ticket": "11".repeat(32)}],
            "layers": {"paths": ["/l.img"], "slot_offset": 0}, "output_dir": "/out"
        });
        let mut c = BatchConfig::from_json(&v.to_string()).unwrap();
        c.sectors = sectors;
        c
    }
}
