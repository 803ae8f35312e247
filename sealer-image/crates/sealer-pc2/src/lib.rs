//! Batch PC2 for the sealer (CC and data sectors): column hashes, tree-c, replica,
//! tree-r-last, tree-d, comm_c / comm_r_last / comm_r, and rust-fil-proofs-compatible output
//! files.
//!
//! Poseidon comes from `neptune` (CPU). All sectors of the batch are processed together:
//! each range of nodes is read once from the interleaved layer pages and fanned out to one
//! streaming tree builder per sector (in parallel with rayon). Tree files are written at
//! their final offsets while leaves stream in, so memory stays bounded by the range size.
//!
//! Output per sector, under `<output_dir>/<sector_id>/` (or, with `lotus` in the config, as a
//! lotus/Curio storage path: `sectorstore.json`, `sealed/s-t0<miner>-<n>`, `cache/s-t0<miner>-<n>/`;
//! see [`sealer_config::sector_paths`]):
//! * `sealed` — the replica: key (last layer) + data in the field; for CC the last layer,
//!   byte for byte;
//! * `cache/sc-02-data-tree-c[-k].dat`, `cache/sc-02-data-tree-r-last[-k].dat`,
//!   `cache/sc-02-data-tree-d.dat`, `cache/sc-02-data-layer-<l>.dat`, `cache/p_aux`,
//!   `cache/t_aux` — the files `seal_commit_phase1` reads.
//!
//! Every file is written under a `.tmp` name and renamed when complete; `p_aux` is renamed
//! last, so a cache directory with `p_aux` is complete.

#![warn(missing_docs)]

pub mod bounds;
mod checkpoint;
pub mod engine;
mod finish;
mod losses;
pub mod outputs;
pub mod shaped;
pub mod snap;
pub mod writer;

use blstrs::Scalar as Fr;
use engine::Engine;
use ff::PrimeField;
use generic_array::typenum::{U11, U2, U8};
use losses::Losses;
use neptune::poseidon::{Poseidon, PoseidonConstants};
use rayon::prelude::*;
use sealer_config::{sector_paths, BatchConfig};
use sealer_error::SealerError;
use sealer_progress::{Progress, ProgressSink};
use sealer_slot::{Geometry, LayerReader};
use sealer_storage::{durable, AlignedBuf, PAGE};
use serde::Serialize;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;
use writer::OutputFile;

fn c2() -> &'static PoseidonConstants<Fr, U2> {
    static C: OnceLock<PoseidonConstants<Fr, U2>> = OnceLock::new();
    C.get_or_init(PoseidonConstants::new)
}
fn c8() -> &'static PoseidonConstants<Fr, U8> {
    static C: OnceLock<PoseidonConstants<Fr, U8>> = OnceLock::new();
    C.get_or_init(PoseidonConstants::new)
}
fn c11() -> &'static PoseidonConstants<Fr, U11> {
    static C: OnceLock<PoseidonConstants<Fr, U11>> = OnceLock::new();
    C.get_or_init(PoseidonConstants::new)
}

/// Poseidon with arity 2 (MerkleTree domain tag).
pub fn poseidon2(a: Fr, b: Fr) -> Fr {
    Poseidon::new_with_preimage(&[a, b], c2()).hash()
}
/// Poseidon with arity 8.
pub fn poseidon8(x: &[Fr]) -> Fr {
    Poseidon::new_with_preimage(x, c8()).hash()
}
/// Poseidon with arity 11.
pub fn poseidon11(x: &[Fr]) -> Fr {
    Poseidon::new_with_preimage(x, c11()).hash()
}

/// A node the sealer computed itself (the synthetic benchmark's): always a field element.
fn fr(b: &[u8]) -> Fr {
    fr_checked(b).expect("a node this process computed is a canonical field element")
}

/// A node read from storage, a file or a device: None when it is not a canonical field
/// element (the bytes were damaged; never a panic).
pub(crate) fn fr_checked(b: &[u8]) -> Option<Fr> {
    let mut r = [0u8; 32];
    r.copy_from_slice(b.get(..32)?);
    Option::from(Fr::from_repr(r))
}

/// Canonical little-endian bytes of a field element.
pub fn fr_bytes(x: &Fr) -> [u8; 32] {
    x.to_repr()
}

/// Tree shape for a sector size: number of base trees (T).
pub fn base_tree_count(sector_size: u64) -> usize {
    match sector_size {
        s if s == 32 << 30 => 8,
        s if s == 64 << 30 => 16,
        _ => 1,
    }
}

/// rows_to_discard for tree-r-last (rust-fil-proofs' default, FIL_PROOFS_ROWS_TO_DISCARD = 2).
pub fn rows_to_discard(leaves: u64) -> usize {
    let rows = (leaves.trailing_zeros() / 3) as usize + 1;
    if rows <= 2 {
        0
    } else if rows == 3 {
        1
    } else {
        (rows - 2).min(2)
    }
}

/// The CPU engine's range, nodes: 2^16, or a base tree's leaves when fewer, and at least a
/// page's rows (a power of two dividing `leaves`).
pub fn cpu_range(leaves: u64, nodes_per_page: u64) -> u64 {
    leaves.min(1 << 16).max(nodes_per_page.min(leaves))
}

/// Nodes of a full arity-8 tree over `leaves` leaves.
pub fn tree_len(leaves: u64) -> u64 {
    (8 * leaves - 1) / 7
}

/// Streaming arity-8 Poseidon tree writer: leaves are pushed in order; rows at or above
/// `first_stored` are written to the file at their final offsets.
pub(crate) struct TreeBuilder {
    /// None: the place of a sector PC2 gave up (it is never fed and writes nothing).
    file: Option<OutputFile>,
    first_stored: usize,
    /// Bytes of the file: the stored rows.
    file_len: u64,
    offsets: Vec<u64>,
    written: Vec<u64>,
    /// Each stored level's chunk being filled, handed to the writer threads when full.
    wbuf: Vec<Option<AlignedBuf>>,
    wlen: Vec<usize>,
    /// Nodes of each level.
    sizes: Vec<u64>,
    pending: Vec<Vec<Fr>>,
    root: Option<Fr>,
}

impl TreeBuilder {
    pub(crate) fn new(path: &Path, leaves: u64, first_stored: usize) -> std::io::Result<Self> {
        Self::layout(path, leaves, first_stored, true)
    }

    /// The builder for a file of `leaves` leaves storing rows from `first_stored` up: created
    /// (sized, empty) or, for a resumed run, opened as it is (it must have that size).
    fn layout(path: &Path, leaves: u64, first_stored: usize, create: bool) -> std::io::Result<Self> {
        let mut b = Self::detached(leaves, first_stored);
        let off = b.file_len;
        let file = if create {
            OutputFile::create(path, off)?
        } else {
            let f = OutputFile::open(path)?;
            if f.file_len()? != off {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} is not the size its checkpoint says", path.display()),
                ));
            }
            f
        };
        b.file = Some(file);
        Ok(b)
    }

    /// A builder with no file: the place in the batch of a sector PC2 gave up.
    pub(crate) fn detached(leaves: u64, first_stored: usize) -> Self {
        let mut sizes = vec![leaves];
        while *sizes.last().unwrap() > 1 {
            sizes.push(sizes.last().unwrap() / 8);
        }
        let mut offsets = vec![u64::MAX; sizes.len()];
        let mut off = 0u64;
        for (i, s) in sizes.iter().enumerate() {
            if i >= first_stored {
                offsets[i] = off;
                off += s * 32;
            }
        }
        TreeBuilder {
            file: None,
            first_stored,
            file_len: off,
            offsets,
            written: vec![0; sizes.len()],
            wbuf: (0..sizes.len()).map(|_| None).collect(),
            wlen: vec![0; sizes.len()],
            pending: vec![Vec::with_capacity(8); sizes.len()],
            sizes,
            root: None,
        }
    }

    pub(crate) fn push(&mut self, level: usize, x: Fr) -> std::io::Result<()> {
        if level >= self.first_stored {
            self.append(level, &fr_bytes(&x))?;
        }
        if level + 1 == self.offsets.len() {
            self.root = Some(x);
            return Ok(());
        }
        self.pending[level].push(x);
        if self.pending[level].len() == 8 {
            let h = poseidon8(&self.pending[level]);
            self.pending[level].clear();
            self.push(level + 1, h)?;
        }
        Ok(())
    }

    /// A whole run of `level`'s nodes computed elsewhere (the GPU engine), in order; nothing
    /// is hashed from them here (the next level arrives the same way or through [`push`]).
    pub(crate) fn put_level(&mut self, level: usize, nodes: &[u8]) -> std::io::Result<()> {
        assert!(self.pending[level].is_empty(), "level {level} takes whole groups of 8");
        if level >= self.first_stored {
            self.append(level, nodes)?;
        }
        Ok(())
    }

    /// Stored bytes of `level` into its chunk; each full chunk goes to the writers. A chunk
    /// holds at most what is left of its level, so the small top levels take little memory.
    fn append(&mut self, level: usize, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            if self.wbuf[level].is_none() {
                let left = self.sizes[level] * 32 - self.written[level];
                self.wbuf[level] = Some(writer::chunk((left as usize).clamp(1, writer::CHUNK)));
            }
            let buf = self.wbuf[level].as_mut().expect("a chunk");
            let at = self.wlen[level];
            let n = (buf.len() - at).min(bytes.len());
            buf.as_mut_slice()[at..at + n].copy_from_slice(&bytes[..n]);
            self.wlen[level] += n;
            bytes = &bytes[n..];
            if self.wlen[level] == buf.len() {
                self.flush_level(level)?;
            }
        }
        Ok(())
    }

    fn flush_level(&mut self, level: usize) -> std::io::Result<()> {
        let len = std::mem::take(&mut self.wlen[level]);
        let Some(buf) = self.wbuf[level].take().filter(|_| len > 0) else {
            return Ok(());
        };
        if let Some(f) = &self.file {
            f.write_buf(buf, len, self.offsets[level] + self.written[level])?;
        }
        self.written[level] += len as u64;
        Ok(())
    }

    pub(crate) fn finish(mut self) -> std::io::Result<Fr> {
        for l in 0..self.offsets.len() {
            self.flush_level(l)?;
        }
        if let Some(f) = &self.file {
            f.sync_all()?;
        }
        Ok(self.root.expect("tree complete"))
    }
}

/// Bytes one sector's PC2 outputs take: replica, tree-d, tree-c, the stored rows of
/// tree-r-last, the layer files when kept, and 4 KiB for `p_aux` and `t_aux`. The operator books
/// the same number at placement (`internal/placement`'s golden; a test here checks both agree).
pub fn output_bytes_per_sector(sector_size: u64, layers: usize, layer_files: bool) -> u64 {
    let nodes = sector_size / 32;
    let t = base_tree_count(sector_size) as u64;
    let leaves = nodes / t;
    let mut rows = vec![leaves];
    while *rows.last().unwrap() > 1 {
        rows.push(rows.last().unwrap() / 8);
    }
    let r_last: u64 = rows[rows_to_discard(leaves) + 1..].iter().sum();
    let layer_bytes = if layer_files { layers as u64 * sector_size } else { 0 };
    sector_size + (2 * nodes - 1) * 32 + t * (tree_len(leaves) + r_last) * 32 + layer_bytes + 4096
}

/// Combine base-tree roots as rust-fil-proofs does for the 8/0/0, 8/8/0 and 8/8/2 shapes.
pub fn combine_roots(roots: &[Fr]) -> Fr {
    match roots.len() {
        1 => roots[0],
        2 => poseidon2(roots[0], roots[1]),
        8 => poseidon8(roots),
        16 => poseidon2(poseidon8(&roots[..8]), poseidon8(&roots[8..])),
        n => panic!("unsupported base tree count {n}"),
    }
}

/// A sealed sector's outputs as PC2 wrote them, all still under their `.tmp` names (`p_aux`
/// too): what an audit reads before anything is renamed into place.
#[derive(Clone, Debug)]
pub struct SealedOutputs {
    /// The sector's index in the batch.
    pub index: usize,
    /// The replica (its `.tmp` name).
    pub replica: PathBuf,
    /// The cache directory; its files are named [`tree_name`] + `.tmp`, `p_aux.tmp`, `t_aux.tmp`.
    pub cache: PathBuf,
    /// comm_c, canonical bytes.
    pub comm_c: [u8; 32],
    /// comm_r_last, canonical bytes.
    pub comm_r_last: [u8; 32],
    /// comm_r, canonical bytes.
    pub comm_r: [u8; 32],
}

/// What every sealed sector must pass before its outputs leave PC2: a sector that fails is
/// given up with the failure's class (`audit` for outputs that are not what their
/// commitments say) and its files deleted, never handed off.
pub trait SectorAudit: Sync {
    /// One verdict per sector of `outputs`, in their order.
    fn audit(&self, cfg: &BatchConfig, outputs: &[SealedOutputs]) -> Vec<Result<(), sealer_data::SectorFailure>>;
}

fn unhex32(h: &str) -> [u8; 32] {
    hex::decode(h).ok().and_then(|b| b.try_into().ok()).expect("a commitment this run encoded")
}

/// Results of one sector.
#[derive(Clone, Debug, Serialize)]
pub struct SectorResult {
    /// Sector number.
    pub sector_id: u64,
    /// replica_id, hex.
    pub replica_id: String,
    /// comm_d, hex.
    pub comm_d: String,
    /// comm_c, hex.
    pub comm_c: String,
    /// comm_r_last, hex.
    pub comm_r_last: String,
    /// comm_r, hex.
    pub comm_r: String,
}

/// `path` with `.tmp` appended (files are written under it and renamed when complete).
pub(crate) fn tmp_of(path: &Path) -> PathBuf {
    durable::tmp_path(path)
}

/// lotus' `sectorstore.json` for a storage path that only stores (sealing happened here).
/// An existing one is the provider's and is kept.
fn write_sectorstore(cfg: &BatchConfig, store: &sealer_config::LotusStore) -> std::io::Result<()> {
    let path = cfg.output_dir.join("sectorstore.json");
    if path.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(&cfg.output_dir)?;
    let meta = serde_json::json!({
        "ID": store.storage_id, "Weight": 10, "CanSeal": false, "CanStore": true,
        "MaxStorage": 0, "Groups": [], "AllowTo": [],
    });
    durable::replace(&path, serde_json::to_string_pretty(&meta).unwrap().as_bytes())
}

#[derive(Serialize, serde::Deserialize)]
struct StoreCfg {
    path: PathBuf,
    id: String,
    size: Option<usize>,
    rows_to_discard: usize,
}

#[derive(Serialize, serde::Deserialize)]
struct TAux {
    labels: Vec<StoreCfg>,
    tree_d_config: StoreCfg,
    tree_r_last_config: StoreCfg,
    tree_c_config: StoreCfg,
}

/// The `t_aux` bytes rust-fil-proofs writes for a cache directory (bincode of TemporaryAux).
pub fn t_aux_bytes(cache: &Path, nodes: u64, layers: usize, sector_size: u64) -> Vec<u8> {
    let t = base_tree_count(sector_size) as u64;
    let leaves = nodes / t;
    let sc = |id: String, size: u64, rtd: usize| StoreCfg {
        path: cache.to_path_buf(),
        id,
        size: Some(size as usize),
        rows_to_discard: rtd,
    };
    let aux = TAux {
        labels: (1..=layers).map(|l| sc(format!("layer-{l}"), nodes, 0)).collect(),
        tree_d_config: sc("tree-d".into(), 2 * nodes - 1, 0),
        tree_r_last_config: sc("tree-r-last".into(), tree_len(leaves), rows_to_discard(leaves)),
        tree_c_config: sc("tree-c".into(), tree_len(leaves), 0),
    };
    bincode::serialize(&aux).expect("bincode")
}

/// tree-r-last's rows_to_discard as a cache directory's `t_aux` records it.
pub(crate) fn t_aux_rows_to_discard(t_aux: &[u8]) -> Result<usize, String> {
    bincode::deserialize::<TAux>(t_aux).map(|t| t.tree_r_last_config.rows_to_discard).map_err(|e| e.to_string())
}

pub(crate) fn data_err(e: sealer_data::DataError) -> SealerError {
    match e {
        sealer_data::DataError::Input(m) => SealerError::Input(m),
        sealer_data::DataError::Mismatch(m) => SealerError::DataMismatch(m),
        sealer_data::DataError::Io(m) => SealerError::Io(m),
    }
}

/// A data node as a field element; fr32-padded data always is one (checked before PC1).
pub(crate) fn field_element(b: &[u8], node: u64) -> std::io::Result<Fr> {
    let mut r = [0u8; 32];
    r.copy_from_slice(b);
    Option::from(Fr::from_repr(r)).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("data node {node} is not a field element"))
    })
}

pub(crate) fn io(what: &str, e: impl std::fmt::Display) -> SealerError {
    SealerError::Io(format!("{what}: {e}"))
}

/// A tree file's name in a cache directory: `sc-02-data-<kind>.dat` for one base tree, else
/// `sc-02-data-<kind>-<k>.dat`.
pub fn tree_name(kind: &str, k: usize, t: usize) -> String {
    if t == 1 {
        format!("sc-02-data-{kind}.dat")
    } else {
        format!("sc-02-data-{kind}-{k}.dat")
    }
}

/// Every `.tmp` file of a cache directory but `p_aux` under its final name, the directory
/// synced after.
fn rename_tmp(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
            if let Some(base) = name.strip_suffix(".tmp") {
                if base != "p_aux" {
                    durable::rename_only(&p, &dir.join(base))?;
                }
            }
        }
    }
    durable::sync_dir(dir)
}

/// Run PC2 for every sector of a batch whose PC1 is complete. Writes per-sector outputs
/// and returns the commitments. `export_layers` also writes the layer files into each cache
/// dir (needed by rust-fil-proofs' C1; 11 × sector size per sector for 32 GiB). A sector
/// given up fails the call ([`run_pc2_with`] goes on without it).
pub fn run_pc2(cfg: &BatchConfig, export_layers: bool) -> Result<Vec<SectorResult>, SealerError> {
    let out = run_pc2_with(cfg, export_layers, None, None)?;
    match out.failed.first() {
        None => Ok(out.results),
        Some(f) => Err(SealerError::Io(format!(
            "{} of {} sectors failed in PC2: {}",
            out.failed.len(),
            cfg.sectors.len(),
            f.reason
        ))),
    }
}

/// What a PC2 run sealed, and the sectors it gave up on its way (their outputs deleted).
#[derive(Debug)]
pub struct Pc2Outcome {
    /// The sealed sectors, in batch order.
    pub results: Vec<SectorResult>,
    /// The sectors given up: a failure of their own files (data read, output writes, a
    /// comm_d that no longer matches); the batch fails only when every sector is.
    pub failed: Vec<sealer_data::SectorFailure>,
    /// Where the time went.
    pub breakdown: Pc2Breakdown,
}

/// [`run_pc2`] publishing progress to `sink` (phase `pc2`), going on without a sector whose
/// own files fail, or that fails `audit` (the sealer's production path always gives one).
pub fn run_pc2_with(
    cfg: &BatchConfig,
    export_layers: bool,
    sink: Option<&ProgressSink>,
    audit: Option<&dyn SectorAudit>,
) -> Result<Pc2Outcome, SealerError> {
    run_pc2_measured(cfg, export_layers, sink, audit)
}

/// How much PC2 work a restart may redo at most: a checkpoint (every output file synced, then
/// `pc2-checkpoint.json`) follows the first range to end this long after the last one.
pub const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Where PC2's wall time went, seconds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Pc2Breakdown {
    /// Waiting for layer pages: the first range, and whatever reading the next range took
    /// beyond hashing the current one (reads overlap hashing).
    pub read_wait: f64,
    /// Column hashing (tree-c leaves), encoding, tree-c and tree-r-last building and replica
    /// writes, all sectors in parallel.
    pub columns_and_trees: f64,
    /// tree-d of every sector (from its data, or the CC tree).
    pub tree_d: f64,
    /// The audit of every sealed sector before its outputs leave (0 without one).
    pub audit: f64,
    /// The GPU engine: seconds its device spent in kernels and in copies (0 on the CPU).
    pub device: sealer_gpu::DeviceTime,
    /// The GPU engine: seconds the host waited for the devices' oldest range (0 on the CPU).
    pub device_wait: f64,
    /// The GPU engine: nodes of the devices' results recomputed on the CPU and found equal.
    pub checked_nodes: u64,
    /// The GPU engine: ranges on each device at once (0 on the CPU).
    pub in_flight: usize,
    /// The GPU engine's device name ("" on the CPU).
    pub device_name: String,
    /// The node PC2 resumed at from its checkpoint (0: a fresh run).
    pub resumed_at_node: u64,
    /// From the first layer read to the results written.
    pub total: f64,
}

/// [`run_pc2_with`]; the outcome also says where the time went.
pub fn run_pc2_measured(
    cfg: &BatchConfig,
    export_layers: bool,
    sink: Option<&ProgressSink>,
    audit: Option<&dyn SectorAudit>,
) -> Result<Pc2Outcome, SealerError> {
    let r = run(cfg, export_layers, sink, audit);
    if let Err(SealerError::Device(_)) = &r {
        // A device that failed its check wrote the ranges its checkpoint covers too, checked only
        // at samples: the retry must not resume over them.
        if let Err(e) = checkpoint::remove(&cfg.output_dir) {
            log::error!("{e}");
        }
    }
    r
}

fn run(
    cfg: &BatchConfig,
    export_layers: bool,
    sink: Option<&ProgressSink>,
    audit: Option<&dyn SectorAudit>,
) -> Result<Pc2Outcome, SealerError> {
    let own_sink;
    let sink = match sink {
        Some(s) => s,
        None => {
            own_sink = ProgressSink::new(cfg, false)?;
            &own_sink
        }
    };
    let slow_ms: u64 = std::env::var("SEALER_TEST_SLOW_PC2_MS").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let layers = cfg.num_layers();
    let done = sealer_slot::layers_intact(cfg)?;
    if done < layers {
        return Err(SealerError::Input(format!("PC1 has finished {done} of {layers} layers; run `sealer pc1` first")));
    }
    let engine = Engine::open(cfg.pc2_engine)?;
    let (rids, cds) = sealer_slot::sector_ids(cfg);
    let batch_id = checkpoint::batch_id(cfg.sector_size, &rids, &cds);
    let t = base_tree_count(cfg.sector_size);
    let g = sealer_slot::geometry(cfg, sealer_slot::Tuning::default());
    let n = cfg.sectors.len();
    let leaves = g.nodes / t as u64;
    let rtd = rows_to_discard(leaves);
    // What a resume trusts, checked once, before anything is written: a checkpoint that fails
    // a check is deleted first, so no later run can trust it over the files this one truncates.
    let sector_files = |s: usize| {
        let p = sector_paths(cfg, cfg.sectors[s].sector_id);
        (tmp_of(&p.sealed), p.cache)
    };
    let shape = checkpoint::Shape {
        ids: cfg.sectors.iter().map(|s| s.sector_id).collect(),
        t,
        leaves,
        r_first: rtd + 1,
        paths: &sector_files,
    };
    let resume = checkpoint::plan_resume(&cfg.output_dir, &batch_id, &shape)?;

    // Output dirs, replica files.
    if let Some(store) = &cfg.lotus {
        write_sectorstore(cfg, store).map_err(|e| io("writing sectorstore.json", e))?;
    }
    let mut losses = Losses::new(cfg.sectors.iter().map(|s| s.sector_id).collect());
    if let Some(c) = &resume {
        losses.restore(&c.lost);
    }
    let mut caches = Vec::new();
    let mut replicas: Vec<Option<OutputFile>> = Vec::new();
    // Per sector: whether its replica and cache are this batch's (opened by this run, or by the
    // run the checkpoint comes from); only those are deleted when the sector is given up.
    let mut ours = Vec::new();
    for (i, s) in cfg.sectors.iter().enumerate() {
        let paths = sector_paths(cfg, s.sector_id);
        let cache = paths.cache;
        if losses.is_lost(i) {
            // Given up before the resume: nothing more is written for it.
            ours.push(tmp_of(&paths.sealed).exists());
            replicas.push(None);
            caches.push(cache);
            continue;
        }
        let opened = (|| {
            std::fs::create_dir_all(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
            let _ = std::fs::remove_file(cache.join("p_aux"));
            if let Some(d) = paths.sealed.parent() {
                std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
            }
            let tmp = tmp_of(&paths.sealed);
            let f = match &resume {
                // The replica written so far stays: the checkpoint covers it.
                Some(_) => std::fs::OpenOptions::new().write(true).open(&tmp),
                None => File::create(&tmp),
            }
            .map_err(|e| format!("opening its replica {}: {e}", tmp.display()))?;
            f.set_len(g.nodes * 32).map_err(|e| format!("sizing its replica {}: {e}", tmp.display()))?;
            OutputFile::from_file(&tmp, f).map_err(|e| format!("opening its replica {}: {e}", tmp.display()))
        })();
        ours.push(opened.is_ok());
        replicas.push(match opened {
            Ok(f) => Some(f),
            Err(e) => {
                losses.give_up(i, "io", format!("PC2 could not open its outputs: {e}"));
                None
            }
        });
        caches.push(cache);
    }

    // Data sectors' staged files, read range by range for the encoding (None: CC, or given up).
    let data: Vec<Option<sealer_data::DataFile>> = (0..n)
        .map(|i| {
            let sec = &cfg.sectors[i];
            match sec.data.as_ref().map(|_| sealer_data::DataFile::open(sec, cfg.sector_size)).transpose() {
                Ok(d) => d,
                Err(e) => {
                    let f = sealer_data::SectorFailure::of(sec.sector_id, e);
                    losses.give_up(i, f.class, f.reason);
                    None
                }
            }
        })
        .collect();
    if let Some(e) = losses.all_lost() {
        return Err(e);
    }

    // Range size: enough nodes to amortise, a power of two dividing `leaves`; on a device, as
    // much as its memory holds.
    let (mut range, in_flight) = match &engine {
        Engine::Cpu => (cpu_range(leaves, g.npp), 0),
        Engine::Gpu(gpus) => {
            let b = engine::gpu_budget_of(gpus, leaves, g.npp, n, layers);
            // Tests run many small ranges, several at once.
            let small = engine::test_override("SEALER_TEST_GPU_RANGE")?.map(|r| r.next_power_of_two().max(g.npp));
            let flight = engine::test_override("SEALER_TEST_GPU_IN_FLIGHT")?.map(|f| f as usize);
            (small.map_or(b.range, |r| r.min(b.range)), flight.unwrap_or(b.in_flight))
        }
    };
    // A resumed run's ranges start where the checkpoint's did: both are powers of two, so the
    // smaller keeps every range aligned with the trees' pending nodes.
    if let Some(c) = &resume {
        range = range.min(c.range);
    }
    if let Engine::Gpu(gpus) = &engine {
        log::info!(
            "PC2 ranges of {range} nodes, each split among {} of {} devices, {in_flight} on each at once",
            engine::parts(range, gpus.len()),
            gpus.len()
        );
    }
    let (mut roots_c, mut roots_r) = match &resume {
        // Checked by the resume plan.
        Some(c) => (
            checkpoint::parse_roots(&c.roots_c).map_err(SealerError::Internal)?,
            checkpoint::parse_roots(&c.roots_r).map_err(SealerError::Internal)?,
        ),
        None => (vec![Vec::new(); n], vec![Vec::new(); n]),
    };
    // Per sector, the finished base trees' file digests, carried into every checkpoint.
    let mut finished: Vec<Vec<checkpoint::TreeDigests>> =
        resume.as_ref().map_or_else(|| vec![Vec::new(); n], |c| c.finished.clone());
    let (k0, next0) = match &resume {
        Some(c) => {
            if c.k == t {
                log::info!("PC2 resumes with every base tree finished (checkpoint {})", checkpoint::FILE);
            } else {
                log::info!(
                    "PC2 resumes at base tree {} of {t}, node {} (checkpoint {})",
                    c.k + 1,
                    c.next,
                    checkpoint::FILE
                );
            }
            (c.k, c.next)
        }
        None => (0, 0),
    };
    let stop_after: Option<usize> =
        std::env::var("SEALER_TEST_PC2_STOP_AFTER_RANGES").ok().and_then(|s| s.parse().ok());
    // Tests (the crash matrix): a checkpoint after every range.
    let every_range = stop_after.is_some() || std::env::var_os("SEALER_TEST_PC2_CHECKPOINT_EVERY_RANGE").is_some();
    let mut ranges_done = 0usize;
    let mut last_checkpoint = Instant::now();
    let pages_per_range = range.div_ceil(g.npp) as usize;
    // Sets of layer buffers: the next range is read while the current one is hashed (on the
    // GPU engine, while `in_flight` ranges are on the devices).
    let mut sets: Vec<Vec<AlignedBuf>> = (0..in_flight.max(1) + 1)
        .map(|_| {
            (0..layers)
                .map(|_| match &engine {
                    Engine::Gpu(gpus) => engine::host_buffer(gpus, pages_per_range * PAGE),
                    Engine::Cpu => AlignedBuf::new(pages_per_range * PAGE),
                })
                .collect()
        })
        .collect();
    // Declared after the buffers, so dropped before them: the rings may hold them registered.
    let mut rd = LayerReader::open(cfg)?;
    let all: Vec<&AlignedBuf> = sets.iter().flatten().collect();
    // SAFETY: `sets` is declared before `rd` (dropped after it) and its buffers never move.
    if let Err(why) = unsafe { rd.register_buffers(&all) } {
        log::info!("PC2 reads into unregistered buffers: io_uring refused to register them ({why})");
    }
    // Declared after the buffers, so dropped before them: the devices may still read them.
    let parts = match &engine {
        Engine::Gpu(gpus) => engine::parts(range, gpus.len()),
        Engine::Cpu => 1,
    };
    let mut pipeline = match &engine {
        Engine::Gpu(gpus) => {
            let shape = sealer_gpu::RangeShape {
                layers,
                row: g.row,
                count: range as usize / parts,
                sectors: n,
                with_data: data.iter().any(|d| d.is_some()),
                tree_r_from: rtd + 1,
            };
            Some(engine::Pipeline::new(gpus, parts, shape, in_flight)?)
        }
        Engine::Cpu => None,
    };
    let mut flights: std::collections::VecDeque<Flight> = Default::default();
    let mut bd = Pc2Breakdown { resumed_at_node: next0, in_flight, ..Default::default() };
    let started = Instant::now();
    let mut prog = Progress::for_pc2(cfg, t, leaves);
    for k in k0..t {
        prog.start_layer(k + 1);
        let start = if k == k0 { next0.max(k as u64 * leaves) } else { k as u64 * leaves };
        prog.update(start - k as u64 * leaves);
        sink.publish(&prog);
        let mut tc: Vec<TreeBuilder> = Vec::new();
        let mut tr: Vec<TreeBuilder> = Vec::new();
        let states =
            resume.as_ref().filter(|c| k == k0 && start > k as u64 * leaves && c.tc.len() == n && c.tr.len() == n);
        for (s, c) in caches.iter().enumerate() {
            let (pc, pr) = (
                c.join(format!("{}.tmp", tree_name("tree-c", k, t))),
                c.join(format!("{}.tmp", tree_name("tree-r-last", k, t))),
            );
            let opened = match states {
                _ if losses.is_lost(s) => None,
                Some(cp) => Some((
                    TreeBuilder::resume(&pc, leaves, 0, &cp.tc[s]),
                    TreeBuilder::resume(&pr, leaves, rtd + 1, &cp.tr[s]),
                )),
                None => Some((TreeBuilder::new(&pc, leaves, 0), TreeBuilder::new(&pr, leaves, rtd + 1))),
            };
            let (bc, br) = match opened {
                Some((Ok(bc), Ok(br))) => (bc, br),
                Some((bc, br)) => {
                    let e = bc.err().or(br.err()).expect("one failed");
                    losses.io(s, &format!("opening its tree files in {}", c.display()), e);
                    (TreeBuilder::detached(leaves, 0), TreeBuilder::detached(leaves, rtd + 1))
                }
                None => (TreeBuilder::detached(leaves, 0), TreeBuilder::detached(leaves, rtd + 1)),
            };
            tc.push(bc);
            tr.push(br);
        }
        if let Some(e) = losses.all_lost() {
            return Err(e);
        }
        let ranges: Vec<(u64, u64)> = (start..(k as u64 + 1) * leaves)
            .step_by(range as usize)
            .map(|v| (v, range.min((k as u64 + 1) * leaves - v)))
            .collect();
        let t0 = Instant::now();
        read_range(&mut rd, &mut sets[0], &g, ranges[0])?;
        bd.read_wait += t0.elapsed().as_secs_f64();
        // What is in the files: on the GPU engine, the ranges in flight are not yet.
        let mut written_to = start;
        for (i, &(v, cnt)) in ranges.iter().enumerate() {
            let (ci, ni) = (i % sets.len(), (i + 1) % sets.len());
            // GPU: with every slot busy, the oldest range comes back first. It is checked while
            // its layers are still in their set (the set the next range is read into), and
            // written while the devices hash the others.
            let mut done: Option<engine::Hashed> = None;
            if let (Some(pl), Engine::Gpu(gpus)) = (pipeline.as_mut(), &engine) {
                if pl.full() {
                    done = Some(collect_checked(pl, gpus, &sets, &mut flights, &g, &mut bd)?);
                }
            }
            let (cur, next) = pick(&mut sets, ci, ni);
            let rd = &mut rd;
            let g = &g;
            let (tcw, trw, reps) = (&mut tc, &mut tr, &replicas);
            let (hashed, read) = std::thread::scope(|sc| {
                let reader = ranges.get(i + 1).map(|&r| sc.spawn(move || read_range(rd, next, g, r)));
                let t0 = Instant::now();
                let first_row = (v % g.npp) as usize;
                if let (Some(pl), Engine::Gpu(_)) = (pipeline.as_mut(), &engine) {
                    let lost: Vec<bool> = (0..n).map(|s| losses.is_lost(s)).collect();
                    let span = done.as_ref().map(|h| h.span());
                    let writer =
                        done.take().map(|h| sc.spawn(move || engine::gpu_range_write(h, (tcw, trw, reps), &lost)));
                    let part_data = gpu_range_data(cfg, &data, (v, cnt), parts, &mut losses);
                    let layers = part_layers(cur, g.row, first_row, cnt as usize / parts, parts);
                    let inputs = part_inputs(&layers, &part_data, g.row, cnt as usize / parts, n);
                    // SAFETY: `cur` is not read into again before this range is collected (the
                    // set read next is the oldest range's, collected above), and `sets` outlives
                    // the pipeline, which waits for its copies when dropped.
                    let submitted = unsafe { pl.submit(&inputs, v) };
                    flights.push_back((v, cnt, ci, part_data));
                    let failed = writer.map_or_else(Vec::new, |h| h.join().expect("PC2 writer panicked"));
                    for (s, e) in failed {
                        losses.io(s, "writing its replica or trees", e);
                    }
                    if let Some((v0, c0)) = span {
                        written_to = v0 + c0;
                    }
                    bd.columns_and_trees += t0.elapsed().as_secs_f64();
                    let t1 = Instant::now();
                    let read = reader.map_or(Ok(()), |h| h.join().expect("PC2 layer reader panicked"));
                    bd.read_wait += t1.elapsed().as_secs_f64();
                    return (submitted, read);
                }
                let lost = &losses;
                let results: Vec<Result<(), (&'static str, String)>> = tcw
                    .par_iter_mut()
                    .zip(trw.par_iter_mut())
                    .zip(reps.par_iter().zip(data.par_iter()))
                    .enumerate()
                    .map(|(s, ((bc, br), (rep, dat)))| {
                        let Some(rep) = rep.as_ref().filter(|_| !lost.is_lost(s)) else {
                            return Ok(()); // given up
                        };
                        let mut col = [Fr::from(0u64); 11];
                        let mut rep_bytes = Vec::with_capacity(cnt as usize * 32);
                        let mut data_bytes = Vec::new();
                        if let Some(d) = dat {
                            data_bytes.resize(cnt as usize * 32, 0);
                            d.read_nodes(v, &mut data_bytes).map_err(|e| ("io", d.read_failed(v, e)))?;
                        }
                        let written =
                            |e: std::io::Error| ("io", format!("PC2 failed writing its replica or trees: {e}"));
                        for i in 0..cnt as usize {
                            let off = (first_row + i) * g.row + s * 32;
                            for l in 0..layers {
                                col[l] = fr_checked(&cur[l].as_slice()[off..off + 32]).ok_or_else(|| {
                                    let node = v + i as u64;
                                    ("io", format!("layer {} holds a label that is not a field element at node {node}: the layer on storage is damaged; seal the sector again", l + 1))
                                })?;
                            }
                            let leaf = if layers == 2 { poseidon2(col[0], col[1]) } else { poseidon11(&col[..11]) };
                            bc.push(0, leaf).map_err(written)?;
                            // replica = key (last layer) + data; CC data is 0.
                            let key = col[layers - 1];
                            let replica = match dat {
                                None => key,
                                Some(d) => {
                                    key + field_element(&data_bytes[i * 32..i * 32 + 32], v + i as u64)
                                        .map_err(|e| ("data-mismatch", d.read_failed(v + i as u64, e)))?
                                }
                            };
                            rep_bytes.extend_from_slice(&fr_bytes(&replica));
                            br.push(0, replica).map_err(written)?;
                        }
                        rep.write_at(&rep_bytes, v * 32).map_err(written)?;
                        Ok(())
                    })
                    .collect();
                for (s, r) in results.into_iter().enumerate() {
                    if let Err((class, why)) = r {
                        losses.give_up(s, class, why);
                    }
                }
                written_to = v + cnt;
                bd.columns_and_trees += t0.elapsed().as_secs_f64();
                let t1 = Instant::now();
                let read = reader.map_or(Ok(()), |h| h.join().expect("PC2 layer reader panicked"));
                bd.read_wait += t1.elapsed().as_secs_f64();
                (Ok(()), read)
            });
            hashed?;
            read?;
            if let Some(e) = losses.all_lost() {
                return Err(e);
            }
            // A checkpoint syncs every output file: every CHECKPOINT_EVERY, not every range, so
            // that the files are synced a few times in all (every range under the test hook).
            let due = every_range || last_checkpoint.elapsed() >= CHECKPOINT_EVERY;
            if v + cnt < (k as u64 + 1) * leaves && due {
                last_checkpoint = Instant::now();
                // Mid-tree: the files so far, synced, then where the trees stand.
                let mut cp = checkpoint::Checkpoint {
                    batch: batch_id.clone(),
                    range,
                    k,
                    next: written_to,
                    roots_c: checkpoint::hex_roots(&roots_c),
                    roots_r: checkpoint::hex_roots(&roots_r),
                    tc: Vec::with_capacity(n),
                    tr: Vec::with_capacity(n),
                    lost: Vec::new(),
                    replica: Vec::with_capacity(n),
                    finished: finished.clone(),
                };
                for (s, ((bc, br), rep)) in tc.iter_mut().zip(tr.iter_mut()).zip(&replicas).enumerate() {
                    let synced = match rep {
                        Some(rep) if !losses.is_lost(s) => (|| {
                            rep.sync_data()?;
                            let (replica, cache) = sector_files(s);
                            let tree = |kind| cache.join(format!("{}.tmp", tree_name(kind, k, t)));
                            Ok::<_, std::io::Error>((
                                checkpoint::digest(&replica, &[(0, written_to)])?,
                                bc.checkpoint(&tree("tree-c"))?,
                                br.checkpoint(&tree("tree-r-last"))?,
                            ))
                        })(),
                        _ => Ok(Default::default()),
                    };
                    let (d, c, r) = synced.unwrap_or_else(|e| {
                        losses.io(s, "syncing its replica and trees", e);
                        Default::default()
                    });
                    cp.replica.push(d);
                    cp.tc.push(c);
                    cp.tr.push(r);
                }
                if let Some(e) = losses.all_lost() {
                    return Err(e);
                }
                cp.lost = losses.to_records();
                checkpoint::save(&cfg.output_dir, &cp).map_err(|e| io("writing the PC2 checkpoint", e))?;
            }
            ranges_done += 1;
            if stop_after == Some(ranges_done) {
                return Err(SealerError::Internal(format!(
                    "stopped after {ranges_done} ranges (SEALER_TEST_PC2_STOP_AFTER_RANGES)"
                )));
            }
            prog.update(v + cnt - k as u64 * leaves);
            sink.publish(&prog);
            if slow_ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(slow_ms));
            }
        }
        // GPU: the ranges still in flight, oldest first.
        if let (Some(pl), Engine::Gpu(gpus)) = (pipeline.as_mut(), &engine) {
            while !pl.is_empty() {
                let h = collect_checked(pl, gpus, &sets, &mut flights, &g, &mut bd)?;
                let lost: Vec<bool> = (0..n).map(|s| losses.is_lost(s)).collect();
                for (s, e) in engine::gpu_range_write(h, (&mut tc, &mut tr, &replicas), &lost) {
                    losses.io(s, "writing its replica or trees", e);
                }
                if let Some(e) = losses.all_lost() {
                    return Err(e);
                }
            }
        }
        for (s, (bc, br)) in tc.into_iter().zip(tr).enumerate() {
            if losses.is_lost(s) {
                continue;
            }
            let cache = &caches[s];
            let digests = |c, r| -> std::io::Result<_> {
                let tree = |kind| cache.join(format!("{}.tmp", tree_name(kind, k, t)));
                Ok((c, r, [checkpoint::file_digest(&tree("tree-c"))?, checkpoint::file_digest(&tree("tree-r-last"))?]))
            };
            match bc.finish().and_then(|c| digests(c, br.finish()?)) {
                Ok((c, r, d)) => {
                    roots_c[s].push(c);
                    roots_r[s].push(r);
                    finished[s].push(d);
                }
                Err(e) => losses.io(s, "finishing its trees", e),
            }
        }
        {
            // A base tree done: the next starts fresh. After the last, the checkpoint says
            // every tree is finished, so a failure in what follows (tree-d, the layer export)
            // does not hash them again.
            let mut replica_digests = vec![String::new(); n];
            for (s, rep) in replicas.iter().enumerate() {
                if let Some(rep) = rep.as_ref().filter(|_| !losses.is_lost(s)) {
                    let end = (k as u64 + 1) * leaves;
                    match rep.sync_data().and_then(|()| checkpoint::digest(&sector_files(s).0, &[(0, end)])) {
                        Ok(d) => replica_digests[s] = d,
                        Err(e) => losses.io(s, "syncing its replica", e),
                    }
                }
            }
            if let Some(e) = losses.all_lost() {
                return Err(e);
            }
            let cp = checkpoint::Checkpoint {
                replica: replica_digests,
                finished: finished.clone(),
                batch: batch_id.clone(),
                range,
                k: k + 1,
                next: (k as u64 + 1) * leaves,
                roots_c: checkpoint::hex_roots(&roots_c),
                roots_r: checkpoint::hex_roots(&roots_r),
                tc: Vec::new(),
                tr: Vec::new(),
                lost: losses.to_records(),
            };
            checkpoint::save(&cfg.output_dir, &cp).map_err(|e| io("writing the PC2 checkpoint", e))?;
        }
    }

    let hashed = finish::Hashed { caches, replicas, ours, roots_c, roots_r, rids, cds, nodes: g.nodes };
    let (results, failed) = finish::finish(cfg, hashed, &mut losses, export_layers, audit, &mut bd)?;
    prog.finish();
    sink.publish(&prog);
    bd.total = started.elapsed().as_secs_f64();
    if let Engine::Gpu(gpus) = &engine {
        bd.device_name = gpus.iter().map(|g| g.info().name.clone()).collect::<Vec<_>>().join(" + ");
    }
    log::info!(
        "PC2 took {:.2} s: waiting for layer reads {:.2} s, columns and trees {:.2} s (device: column kernels {:.2} s, tree kernels {:.2} s, uploads {:.2} s, readbacks {:.2} s, {:.2} s of uploads beside column kernels; {} ranges at once, waiting for the oldest {:.2} s, {} nodes checked on the CPU), tree-d {:.2} s, audit {:.2} s",
        bd.total,
        bd.read_wait,
        bd.columns_and_trees,
        bd.device.column_kernels,
        bd.device.tree_kernels,
        bd.device.uploads,
        bd.device.readbacks,
        bd.device.overlapped,
        bd.in_flight,
        bd.device_wait,
        bd.checked_nodes,
        bd.tree_d,
        bd.audit
    );
    Ok(Pc2Outcome { results, failed, breakdown: bd })
}

/// The data sectors' nodes of range `(v, cnt)` for the GPU engine, split into `parts` parts,
/// each `[sector][node]` (None: all CC). A sector whose data fails to read, or is not field
/// elements, is given up (its column hashed over zeros and thrown away).
fn gpu_range_data(
    cfg: &BatchConfig,
    data: &[Option<sealer_data::DataFile>],
    (v, cnt): (u64, u64),
    parts: usize,
    losses: &mut Losses,
) -> Vec<Option<Vec<u8>>> {
    let per = cnt as usize * 32;
    let sectors = cfg.sectors.len();
    if data.iter().all(|d| d.is_none()) {
        return vec![None; parts];
    }
    let mut b = vec![0u8; sectors * per];
    for (s, d) in data.iter().enumerate() {
        let Some(d) = d.as_ref().filter(|_| !losses.is_lost(s)) else { continue };
        let nodes = &mut b[s * per..(s + 1) * per];
        let checked = d.read_nodes(v, nodes).map_err(|e| ("io", d.read_failed(v, e))).and_then(|()| {
            // The device adds without checking: a node that is not a field element fails here.
            nodes.chunks(32).enumerate().try_for_each(|(i, node)| {
                field_element(node, v + i as u64)
                    .map(|_| ())
                    .map_err(|e| ("data-mismatch", d.read_failed(v + i as u64, e)))
            })
        });
        if let Err((class, why)) = checked {
            losses.give_up(s, class, why);
            nodes.fill(0);
        }
    }
    let c = per / parts;
    (0..parts)
        .map(|p| Some((0..sectors).flat_map(|s| &b[s * per + p * c..s * per + (p + 1) * c]).copied().collect()))
        .collect()
}

/// Each part's rows (`c` from row `first_row + p·c`) of every layer's pages: only those are
/// copied to its device.
pub(crate) fn part_layers(set: &[AlignedBuf], row: usize, first_row: usize, c: usize, parts: usize) -> Vec<Vec<&[u8]>> {
    (0..parts)
        .map(|p| {
            set.iter().map(|b| &b.as_slice()[(first_row + p * c) * row..(first_row + (p + 1) * c) * row]).collect()
        })
        .collect()
}

/// The devices' inputs for one range: part `p`'s layers and data.
pub(crate) fn part_inputs<'a>(
    layers: &'a [Vec<&'a [u8]>],
    data: &'a [Option<Vec<u8>>],
    row: usize,
    c: usize,
    sectors: usize,
) -> Vec<sealer_gpu::RangeInput<'a>> {
    layers
        .iter()
        .zip(data)
        .map(|(l, d)| sealer_gpu::RangeInput { layers: l, row, first_row: 0, count: c, sectors, data: d.as_deref() })
        .collect()
}

/// A range on the GPU engine's devices: its first node, rows, layer set and each part's data.
type Flight = (u64, u64, usize, Vec<Option<Vec<u8>>>);

/// The GPU engine's oldest range in flight, waited for and checked against its inputs (its
/// layer set is untouched until it is collected).
fn collect_checked(
    pl: &mut engine::Pipeline,
    gpus: &[sealer_gpu::Gpu],
    sets: &[Vec<AlignedBuf>],
    flights: &mut std::collections::VecDeque<Flight>,
    g: &Geometry,
    bd: &mut Pc2Breakdown,
) -> Result<engine::Hashed, SealerError> {
    let t = Instant::now();
    let (mut h, time) = pl.collect()?;
    bd.device_wait += t.elapsed().as_secs_f64();
    bd.device += time;
    let (v, cnt, set, data) = flights.pop_front().expect("a range in flight");
    let parts = data.len();
    let c = cnt as usize / parts;
    let layers = part_layers(&sets[set], g.row, (v % g.npp) as usize, c, parts);
    let sectors = h.parts().next().map_or(0, |(_, _, o)| o.sectors());
    let inputs = part_inputs(&layers, &data, g.row, c, sectors);
    bd.checked_nodes += h.check(gpus, &inputs, bd.resumed_at_node ^ CHECK_SALT.with(|s| *s))? as u64;
    Ok(h)
}

thread_local! {
    /// Where the per-range checks sample: different in every run.
    static CHECK_SALT: u64 = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5ea1);
        h.finish()
    };
}

/// `&v[a]` and `&mut v[b]`, two different elements.
pub(crate) fn pick<T>(v: &mut [T], a: usize, b: usize) -> (&T, &mut T) {
    assert_ne!(a, b, "two different sets");
    if a < b {
        let (x, y) = v.split_at_mut(b);
        (&x[a], &mut y[0])
    } else {
        let (x, y) = v.split_at_mut(a);
        (&y[0], &mut x[b])
    }
}

/// Read the pages of range `(v, count)` (nodes) of every layer into `bufs`, one per layer, all
/// layers' requests in flight at once.
fn read_range(
    rd: &mut LayerReader,
    bufs: &mut [AlignedBuf],
    g: &Geometry,
    (v, count): (u64, u64),
) -> Result<(), SealerError> {
    let p0 = v / g.npp;
    let pages = (v + count).div_ceil(g.npp) - p0;
    let mut layers: Vec<(u32, &mut AlignedBuf)> = bufs.iter_mut().enumerate().map(|(l, b)| (l as u32 + 1, b)).collect();
    rd.read_layers(&mut layers, p0, pages as usize)
}

fn export_into_caches(cfg: &BatchConfig, caches: &[PathBuf], lost: impl Fn(usize) -> bool) -> Result<(), SealerError> {
    // Export into a scratch dir next to the caches, then move each file into place as .tmp.
    let scratch = cfg.output_dir.join(".layer-export");
    let _ = std::fs::remove_dir_all(&scratch);
    sealer_slot::export_layers(cfg, &scratch)?;
    for (s, sec) in cfg.sectors.iter().enumerate().filter(|(s, _)| !lost(*s)) {
        for l in 1..=cfg.num_layers() {
            let name = format!("sc-02-data-layer-{l}.dat");
            durable::rename_only(
                &scratch.join(sec.sector_id.to_string()).join(&name),
                &caches[s].join(format!("{name}.tmp")),
            )
            .map_err(|e| io("moving layer file", e))?;
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limbs(x: &Fr) -> [u64; 4] {
        let b = fr_bytes(x);
        std::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap()))
    }

    #[test]
    fn poseidon_vectors_from_spec() {
        let h = poseidon2(Fr::from(0u64), Fr::from(1u64));
        assert_eq!(limbs(&h), [0x2e203c369a02e7ff, 0xa6fba9339d05a69d, 0x739e0fd902efe161, 0x396508d75e76a56b]);
        let v: Vec<Fr> = (0..8u64).map(Fr::from).collect();
        assert_eq!(
            limbs(&poseidon8(&v)),
            [0x2a9934f56d38a5e6, 0x4b682e9d9cc4aed9, 0x1201004211677077, 0x2394611da3a5de55]
        );
        let v: Vec<Fr> = (0..11u64).map(Fr::from).collect();
        assert_eq!(
            limbs(&poseidon11(&v)),
            [0xcee3bbc32b693163, 0x09f3dcd8ccb08fc1, 0x6ca537e232ebe87a, 0x0c0fc1b2e5227f28]
        );
    }

    #[test]
    fn output_bytes_agree_with_the_operators_booking() {
        let golden: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../../internal/placement/testdata/output-bytes.golden.json"),
            )
            .unwrap(),
        )
        .unwrap();
        for (size, _, _, layers) in sealer_config::SECTOR_SIZES {
            assert_eq!(
                output_bytes_per_sector(size, layers, true),
                golden[size.to_string()].as_u64().unwrap(),
                "sector size {size}"
            );
        }
    }

    #[test]
    fn shapes() {
        assert_eq!(rows_to_discard(64), 1);
        assert_eq!(rows_to_discard(1 << 18), 2);
        assert_eq!(tree_len(64), 73);
        // 5 StoreConfigs: 210 fixed bytes + 5 × path length (the spec's 440-byte example has a 46-byte path)
        assert_eq!(t_aux_bytes(Path::new("/x"), 64, 2, 2048).len(), 210 + 5 * 2);
    }
}
