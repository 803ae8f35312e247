//! Batch configuration for the sealfleet sealer.
//!
//! The operator renders one JSON file per batch. [`BatchConfig::from_json`] parses and
//! validates it; every error names the offending field and how to fix it ([`ConfigError`]),
//! and validation happens before the sealer touches any storage.
//!
//! The CPU [`Layout`] accepts exactly the JSON printed by the operator's calculator (the one
//! owner of the core-role arithmetic, `internal/layout` in the Go module); a config run by hand
//! without one gets [`Layout::default_for`], the simplest layout that runs on this machine.

#![warn(missing_docs)]

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use values::{Hex32, Named, U64};

mod fit;
mod layout;
mod snap;
mod values;
pub use fit::{CpuFit, CpuPlace, CpuTopology};
pub use layout::{allowed_cpus, l3_groups, parse_cpu_list, Coordinator, Hasher, Layout, Roles};
pub use snap::{SnapConfig, SnapSectorSpec};

/// Config keys the operator never renders: the proof given field by field instead of as
/// `registered_proof`, and a progress file (the operator reads `/progress` over HTTP). Every
/// other key the sealer reads is rendered by the operator (tested against its golden config).
pub const STANDALONE_KEYS: [&str; 5] = ["sector_size", "porep_id", "api_version", "features", "progress_file"];

/// Largest batch the sealer supports (one node of every sector fills a 4 KiB page).
pub const MAX_BATCH: usize = 128;

/// A configuration error: which field, and what is wrong / how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid config field `{field}`: {message}")]
pub struct ConfigError {
    /// JSON path of the field, e.g. `sectors[3].ticket`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn err<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError { field: field.into(), message: message.into() })
}

/// PoRep API version; selects the graph rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApiVersion {
    /// 1.0.0: legacy graph (different DRG slot order, u32 expander truncation).
    V1_0_0,
    /// 1.1.0.
    V1_1_0,
    /// 1.2.0 (same PC1 as 1.1.0; used with SyntheticPoRep / NonInteractivePoRep).
    V1_2_0,
}

impl ApiVersion {
    /// Parse "1.0.0" / "1.1.0" / "1.2.0".
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "1.0.0" | "1.0" => Some(ApiVersion::V1_0_0),
            "1.1.0" | "1.1" => Some(ApiVersion::V1_1_0),
            "1.2.0" | "1.2" => Some(ApiVersion::V1_2_0),
            _ => None,
        }
    }
    /// Dotted form.
    pub fn as_str(&self) -> &'static str {
        match self {
            ApiVersion::V1_0_0 => "1.0.0",
            ApiVersion::V1_1_0 => "1.1.0",
            ApiVersion::V1_2_0 => "1.2.0",
        }
    }
}

/// Optional PoRep features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Feature {
    /// Synthetic PoRep.
    SyntheticPoRep,
    /// Non-interactive PoRep.
    NonInteractivePoRep,
}

impl Feature {
    /// Name as used in configs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Feature::SyntheticPoRep => "SyntheticPoRep",
            Feature::NonInteractivePoRep => "NonInteractivePoRep",
        }
    }
}

/// Sector sizes with published parameters, their index in the proof-id table and layer count.
pub const SECTOR_SIZES: [(u64, &str, u64, usize); 5] = [
    (2 << 10, "2KiB", 0, 2),
    (8 << 20, "8MiB", 1, 2),
    (512 << 20, "512MiB", 2, 2),
    (32 << 30, "32GiB", 3, 11),
    (64 << 30, "64GiB", 4, 11),
];

/// A sector size given by name (`8MiB`, any case) or in bytes (`8388608`): its bytes, or an
/// error that lists the sizes there are.
pub fn parse_sector_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    SECTOR_SIZES
        .iter()
        .find(|z| z.1.eq_ignore_ascii_case(s) || z.0.to_string() == s)
        .map(|z| z.0)
        .ok_or_else(|| format!("{s:?} is not a sector size; use one of {}", size_names()))
}

/// Number of SDR layers rust-fil-proofs uses for `sector_size`.
pub fn layers_for(sector_size: u64) -> Option<usize> {
    SECTOR_SIZES.iter().find(|s| s.0 == sector_size).map(|s| s.3)
}

/// `porep_id = LE64(proof_id) ‖ LE64(0) ‖ 0^16`.
pub fn porep_id_for(proof_id: u64) -> [u8; 32] {
    let mut id = [0u8; 32];
    id[..8].copy_from_slice(&proof_id.to_le_bytes());
    id
}

/// What a `registered_proof` name stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredProof {
    /// Sector size in bytes.
    pub sector_size: u64,
    /// Numeric proof id (0..=19).
    pub proof_id: u64,
    /// API version.
    pub api_version: ApiVersion,
    /// Features.
    pub features: Vec<Feature>,
}

impl RegisteredProof {
    /// The name of proof id `id` (0..=19), e.g. 3 → `StackedDrg32GiBV1`.
    pub fn name_of(id: u64) -> Option<String> {
        let (size, variant) = (id % 5, id / 5);
        let label = SECTOR_SIZES.get(size as usize)?.1;
        let v = ["V1", "V1_1", "V1_1_Feat_SyntheticPoRep", "V1_2_Feat_NonInteractivePoRep"].get(variant as usize)?;
        Some(format!("StackedDrg{label}{v}"))
    }

    /// Parse names like `StackedDrg32GiBV1_1`, `StackedDrg2KiBV1`,
    /// `StackedDrg8MiBV1_1_Feat_SyntheticPoRep`, `StackedDrg64GiBV1_2_Feat_NonInteractivePoRep`.
    pub fn parse(name: &str) -> Option<Self> {
        let rest = name.strip_prefix("StackedDrg")?;
        for (i, (size, label, _, _)) in SECTOR_SIZES.iter().enumerate() {
            if let Some(v) = rest.strip_prefix(label) {
                let i = i as u64;
                let (base, api, features) = match v {
                    "V1" => (0, ApiVersion::V1_0_0, vec![]),
                    "V1_1" => (5, ApiVersion::V1_1_0, vec![]),
                    "V1_1_Feat_SyntheticPoRep" => (10, ApiVersion::V1_2_0, vec![Feature::SyntheticPoRep]),
                    "V1_2_Feat_NonInteractivePoRep" => (15, ApiVersion::V1_2_0, vec![Feature::NonInteractivePoRep]),
                    _ => return None,
                };
                return Some(RegisteredProof { sector_size: *size, proof_id: base + i, api_version: api, features });
            }
        }
        None
    }
}

/// One sector of the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectorSpec {
    /// Prover id (32 bytes).
    pub prover_id: [u8; 32],
    /// Sector number.
    pub sector_id: u64,
    /// Ticket (32 bytes).
    pub ticket: [u8; 32],
    /// comm_d. For a CC sector (no `data`) only the CC commitment of the sector size is
    /// accepted, and `None` means that one. For a data sector `None` means "computed from its
    /// pieces" (`sealer-data` fills it in at load); a given one must equal the pieces'.
    pub comm_d: Option<[u8; 32]>,
    /// The sector's deal data; `None` for a committed-capacity (CC) sector.
    pub data: Option<SectorData>,
}

/// A data sector's staged unsealed file and the pieces it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectorData {
    /// The staged sector file: fr32-padded, as filecoin-proofs' `add_piece` writes it, at most
    /// one sector long (a shorter file is zero beyond its end, as filecoin-proofs treats it).
    pub path: PathBuf,
    /// The pieces in the order they sit in the file (alignment padding between them implied,
    /// as lotus and filecoin-proofs' `compute_comm_d` place them).
    pub pieces: Vec<Piece>,
}

/// One deal piece: its commitment and padded size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// comm_p (32 bytes, the digest of the piece CID).
    pub comm_p: [u8; 32],
    /// Padded size in bytes: a power of two, at least 128.
    pub size: u64,
}

/// Where the interleaved layers live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPaths {
    /// Block devices or regular files; pages are striped over them in this order.
    pub paths: Vec<PathBuf>,
    /// Offset of this batch's slot on every path, in 4 KiB blocks.
    pub slot_offset: u64,
}

/// A validated batch configuration.
#[derive(Clone, Debug)]
pub struct BatchConfig {
    /// Sector size in bytes (one of [`SECTOR_SIZES`]).
    pub sector_size: u64,
    /// PoRep id (32 bytes).
    pub porep_id: [u8; 32],
    /// API version.
    pub api_version: ApiVersion,
    /// Features.
    pub features: Vec<Feature>,
    /// The sectors, in pipeline order (index = column in the interleaved pages).
    pub sectors: Vec<SectorSpec>,
    /// Layer storage.
    pub layers: LayerPaths,
    /// Output directory (state file, progress, exports).
    pub output_dir: PathBuf,
    /// CPU layout, if given in the config.
    pub layout: Option<Layout>,
    /// Optional machine-readable progress file (JSON, rewritten atomically).
    pub progress_file: Option<PathBuf>,
    /// Optional HTTP port for `/progress` and `/metrics`.
    pub metrics_port: Option<u16>,
    /// Address the metrics port listens on (default 0.0.0.0: every address of the pod;
    /// on the host network give the node address to scrape, or 127.0.0.1).
    pub metrics_address: std::net::IpAddr,
    /// Write the outputs as a lotus/Curio storage path instead of one directory per sector.
    pub lotus: Option<LotusStore>,
    /// 1 GiB hugepages the process may map for its buffers (the pod's `hugepages-1Gi`).
    pub hugepages_1gi: usize,
    /// Memory for the resident part of the previous layer (PC1 `Tuning::resident_bytes`): the
    /// batch's share of it, on the hugepages the operator booked for it. 0: none.
    pub resident_bytes: u64,
    /// The node's parent-cache directory (read-only): the verified cache is taken from there
    /// and never built. None: build or reuse it under `FIL_PROOFS_PARENT_CACHE` (standalone).
    pub parent_cache_dir: Option<PathBuf>,
    /// Where PC2's Poseidon runs (`pc2_engine`: "cpu", the default, or "gpu").
    pub pc2_engine: Pc2Engine,
    /// Sectors left out of the batch because a check of their own failed (`sealer batch`):
    /// sealed as CC fillers so the batch keeps the size it was placed with, their outputs
    /// under `<output_dir>/.filler/` ([`FILLER_DIR`]) and discarded. Never in a config file.
    pub fillers: std::collections::BTreeSet<u64>,
}

/// Where filler sectors' outputs go under the output directory (removed after PC2).
pub const FILLER_DIR: &str = ".filler";

/// Where PC2's Poseidon runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pc2Engine {
    /// neptune on the CPU cores.
    #[default]
    Cpu,
    /// An OpenCL device (sealer-gpu): the first GPU, or `SEALER_GPU_DEVICE`'s index.
    Gpu,
}

impl Pc2Engine {
    /// Parse `cpu` / `gpu`.
    pub fn parse(s: &str) -> Option<Pc2Engine> {
        match s {
            "cpu" => Some(Pc2Engine::Cpu),
            "gpu" => Some(Pc2Engine::Gpu),
            _ => None,
        }
    }

    /// The name the config and the CLI use.
    pub fn as_str(self) -> &'static str {
        match self {
            Pc2Engine::Cpu => "cpu",
            Pc2Engine::Gpu => "gpu",
        }
    }
}

/// A lotus/Curio storage path as the output directory: `sectorstore.json`,
/// `sealed/s-t0<miner>-<n>` and `cache/s-t0<miner>-<n>/`, where those tools look for sectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LotusStore {
    /// The miner's actor id (the number of its f0… address); every sector's prover id must be it.
    pub miner: u64,
    /// The storage path's id in `sectorstore.json` (unique per storage path, e.g. a UUID).
    pub storage_id: String,
}

impl LotusStore {
    /// lotus' sector file name, `s-t0<miner>-<number>`.
    pub fn sector_name(&self, sector_id: u64) -> String {
        format!("s-t0{}-{}", self.miner, sector_id)
    }
}

/// Where one sector's replica and cache directory go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectorPaths {
    /// The replica file.
    pub sealed: PathBuf,
    /// The cache directory (trees, p_aux, t_aux, layers).
    pub cache: PathBuf,
}

/// Paths of one sector's outputs: `<output_dir>/<sector_id>/{sealed,cache/}`, or as a
/// lotus/Curio storage path `<output_dir>/sealed/s-t0<miner>-<n>` and `cache/s-t0<miner>-<n>/`;
/// a filler's under `<output_dir>/.filler/<sector_id>/`.
pub fn sector_paths(cfg: &BatchConfig, sector_id: u64) -> SectorPaths {
    if cfg.fillers.contains(&sector_id) {
        let dir = cfg.output_dir.join(FILLER_DIR).join(sector_id.to_string());
        return SectorPaths { sealed: dir.join("sealed"), cache: dir.join("cache") };
    }
    match &cfg.lotus {
        Some(l) => {
            let name = l.sector_name(sector_id);
            SectorPaths {
                sealed: cfg.output_dir.join("sealed").join(&name),
                cache: cfg.output_dir.join("cache").join(name),
            }
        }
        None => {
            let dir = cfg.output_dir.join(sector_id.to_string());
            SectorPaths { sealed: dir.join("sealed"), cache: dir.join("cache") }
        }
    }
}

/// The prover id of an ID address: the actor id as an unsigned LEB128 varint, zero-padded.
pub fn prover_id_of(actor: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let (mut v, mut i) = (actor, 0);
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = b;
            return out;
        }
        out[i] = b | 0x80;
        i += 1;
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSector {
    prover_id: Option<Hex32>,
    sector_id: Option<U64>,
    ticket: Option<Hex32>,
    comm_d: Option<Hex32>,
    data: Option<RawData>,
}

/// A data sector's `data` as the config gives it (also in the update config).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawData {
    path: Option<String>,
    pieces: Option<Vec<RawPiece>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPiece {
    comm_p: Option<Hex32>,
    size: Option<U64>,
}

/// Check a data sector's `data` (at `field`): a path and a non-empty piece list that fits the
/// sector.
pub(crate) fn parse_data(field: &str, raw: RawData, sector_size: u64) -> Result<SectorData, ConfigError> {
    let path = match raw.path {
        Some(p) if p.starts_with('/') => PathBuf::from(p),
        _ => return err(format!("{field}.path"), "give the staged sector file as an absolute path"),
    };
    let raw_pieces = match raw.pieces {
        Some(p) if !p.is_empty() => p,
        _ => {
            return err(
                format!("{field}.pieces"),
                "give the pieces the file holds ({comm_p, size} each, in file order); a sector without pieces is CC: drop `data`",
            )
        }
    };
    let mut pieces = Vec::with_capacity(raw_pieces.len());
    let mut total = 0u64;
    for (j, rp) in raw_pieces.into_iter().enumerate() {
        let pf = format!("{field}.pieces[{j}]");
        let Some(Hex32(comm_p)) = rp.comm_p else {
            return err(format!("{pf}.comm_p"), "missing; give 64 hex characters");
        };
        let Some(U64(size)) = rp.size else {
            return err(format!("{pf}.size"), "missing; give the padded piece size in bytes");
        };
        if size < 128 || !size.is_power_of_two() {
            return err(
                format!("{pf}.size"),
                format!("{size} is not a padded piece size: a power of two of at least 128 bytes"),
            );
        }
        // Each piece starts at a multiple of its size (padding implied), as compute_comm_d lays them out.
        total = total.div_ceil(size) * size + size;
        if total > sector_size {
            return err(
                format!("{pf}.size"),
                format!("the pieces up to this one need {total} bytes with alignment padding; the sector holds {sector_size}"),
            );
        }
        pieces.push(Piece { comm_p, size });
    }
    Ok(SectorData { path, pieces })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLayers {
    paths: Option<Vec<String>>,
    slot_offset: Option<U64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    sector_size: Option<U64>,
    porep_id: Option<Hex32>,
    api_version: Option<Named<ApiVersion>>,
    features: Option<Vec<Named<Feature>>>,
    registered_proof: Option<Named<RegisteredProof>>,
    sectors: Option<Vec<RawSector>>,
    layers: Option<RawLayers>,
    output_dir: Option<String>,
    layout: Option<Layout>,
    progress_file: Option<PathBuf>,
    metrics_port: Option<U64>,
    metrics_address: Option<Named<std::net::IpAddr>>,
    lotus: Option<RawLotus>,
    hugepages_1gi: Option<U64>,
    resident_bytes: Option<U64>,
    parent_cache_dir: Option<String>,
    pc2_engine: Option<Named<Pc2Engine>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLotus {
    miner: U64,
    storage_id: String,
}

/// Parse a 32-byte value given as 64 hex characters (an optional `0x` prefix is accepted).
pub fn parse_hex32(field: &str, v: &serde_json::Value) -> Result<[u8; 32], ConfigError> {
    let s = v.as_str().map_or_else(|| err(field, format!("must be a string, got {v}")), Ok)?;
    Hex32::parse(s).map_err(|message| ConfigError { field: field.into(), message })
}

fn size_names() -> String {
    SECTOR_SIZES.iter().map(|s| format!("{} ({})", s.0, s.1)).collect::<Vec<_>>().join(", ")
}

/// The name `api_version` gave, for messages.
fn raw_api(a: &Option<Named<ApiVersion>>) -> &'static str {
    a.as_ref().map_or("", |Named(a)| a.as_str())
}

/// Check sector `i` of the config.
fn sector(i: usize, rs: RawSector, sector_size: u64) -> Result<SectorSpec, ConfigError> {
    let f = |k: &str| format!("sectors[{i}].{k}");
    let Some(Hex32(prover_id)) = rs.prover_id else {
        return err(f("prover_id"), "missing; give 64 hex characters");
    };
    let Some(U64(sector_id)) = rs.sector_id else {
        return err(f("sector_id"), "missing; give the sector number");
    };
    let Some(Hex32(ticket)) = rs.ticket else {
        return err(f("ticket"), "missing; give 64 hex characters");
    };
    let comm_d = rs.comm_d.map(|Hex32(d)| d);
    let data = rs.data.map(|d| parse_data(&f("data"), d, sector_size)).transpose()?;
    // Without data the only comm_d the sealer can honour is the CC one. Any other would
    // label a CC replica under a foreign commitment that no proof can ever back (and a
    // precommit of it loses the deposit).
    if let (Some(d), None) = (comm_d, &data) {
        if d != sealer_hash::cc_comm_d(sector_size) {
            return err(
                f("comm_d"),
                format!(
                    "sector {} has a comm_d ({}) but no data: a replica under a comm_d whose data \
                     the sealer never saw can never be proven; give the sector's `data` (staged \
                     file and pieces), or omit comm_d to seal it as CC",
                    sector_id,
                    hex::encode(d)
                ),
            );
        }
    }
    Ok(SectorSpec { prover_id, sector_id, ticket, comm_d, data })
}

/// `given`, or what `registered_proof` implies when it is absent; both must agree.
fn with_proof<T: PartialEq>(
    field: &str,
    given: Option<T>,
    from_proof: Option<T>,
    contradiction: impl FnOnce(&T) -> String,
    missing: &str,
) -> Result<T, ConfigError> {
    match (given, from_proof) {
        (Some(g), Some(p)) if g != p => err(field, contradiction(&p)),
        (Some(g), _) => Ok(g),
        (None, Some(p)) => Ok(p),
        (None, None) => err(field, missing),
    }
}

impl BatchConfig {
    /// Read and validate a config file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            field: "<file>".into(),
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        Self::from_json(&text)
    }

    /// Parse and validate config JSON. Unknown keys are rejected: the operator renders exactly
    /// the keys the sealer reads (see [`STANDALONE_KEYS`] and the contract test).
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = values::from_json(text).map_err(|e| match e.field.strip_prefix("layout") {
            // The calculator's JSON, whole: a key deep inside it is not one the user wrote.
            Some(rest) if rest.is_empty() || rest.starts_with(['.', '[']) => ConfigError {
                field: "layout".into(),
                message: format!(
                    "must be the calculator's JSON {{batch_size, supported, coordinators:[{{cpu, hashers:[{{cpu, sectors}}]}}], roles:{{writer, reader, orchestrator}}}}: {} (at {})",
                    e.message, e.field
                ),
            },
            _ => e,
        })?;

        // registered_proof fills sector_size / porep_id / api_version / features.
        let reg = raw.registered_proof.map(|Named(r)| r);
        let sector_size = with_proof(
            "sector_size",
            raw.sector_size.map(|U64(s)| s),
            reg.as_ref().map(|r| r.sector_size),
            |p| format!("{} contradicts registered_proof (size {p}); drop one of them", raw.sector_size.unwrap().0),
            &format!("missing; set it to one of {} or set registered_proof", size_names()),
        )?;
        if layers_for(sector_size).is_none() {
            return err("sector_size", format!("unsupported size {sector_size}; use one of {}", size_names()));
        }
        let porep_id = with_proof(
            "porep_id",
            raw.porep_id.map(|Hex32(h)| h),
            reg.as_ref().map(|r| porep_id_for(r.proof_id)),
            |_| "contradicts registered_proof; drop one of them".into(),
            "missing; give 64 hex characters (LE64 proof id ‖ LE64 nonce ‖ 16 zero bytes) or set registered_proof",
        )?;
        let api_version = with_proof(
            "api_version",
            raw.api_version.as_ref().map(|Named(a)| *a),
            reg.as_ref().map(|r| r.api_version),
            |p| {
                format!("{} contradicts registered_proof ({}); drop one of them", raw_api(&raw.api_version), p.as_str())
            },
            "missing; use \"1.0.0\", \"1.1.0\" or \"1.2.0\" or set registered_proof",
        )?;
        let given_features = raw.features.map(|fs| {
            let mut out: Vec<Feature> = Vec::new();
            for Named(f) in fs {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
            out
        });
        let features = match (given_features, reg.as_ref().map(|r| r.features.clone())) {
            (None, None) => vec![],
            (g, p) => with_proof("features", g, p, |_| "contradicts registered_proof; drop one of them".into(), "")?,
        };
        if !features.is_empty() && api_version != ApiVersion::V1_2_0 {
            return err("features", "SyntheticPoRep / NonInteractivePoRep need api_version \"1.2.0\"");
        }
        if features.len() > 1 {
            return err("features", "give at most one of SyntheticPoRep and NonInteractivePoRep");
        }

        let Some(sectors_raw) = raw.sectors else {
            return err("sectors", "missing; give a list of {prover_id, sector_id, ticket}");
        };
        let n = sectors_raw.len();
        if n == 0 || n > MAX_BATCH || !n.is_power_of_two() {
            return err(
                "sectors",
                format!("batch of {n} sectors is not supported; use a power of two from 1 to {MAX_BATCH}"),
            );
        }
        let sectors = sectors_raw
            .into_iter()
            .enumerate()
            .map(|(i, rs)| sector(i, rs, sector_size))
            .collect::<Result<Vec<_>, _>>()?;
        for i in 0..n {
            for j in 0..i {
                if sectors[i].sector_id == sectors[j].sector_id && sectors[i].prover_id == sectors[j].prover_id {
                    return err(
                        format!("sectors[{i}].sector_id"),
                        format!("duplicates sectors[{j}] (same prover and sector id)"),
                    );
                }
            }
        }

        let Some(rl) = raw.layers else {
            return err("layers", "missing; give {\"paths\": [...], \"slot_offset\": 0}");
        };
        let paths = match rl.paths {
            Some(p) if !p.is_empty() => {
                let mut out: Vec<PathBuf> = Vec::new();
                for (i, s) in p.into_iter().enumerate() {
                    let f = format!("layers.paths[{i}]");
                    if !s.starts_with('/') {
                        return err(f, format!("`{s}` must be an absolute path to a block device or file"));
                    }
                    let pb = PathBuf::from(&s);
                    if out.contains(&pb) {
                        return err(f, format!("`{s}` is listed twice; each path may appear once"));
                    }
                    out.push(pb);
                }
                out
            }
            _ => return err("layers.paths", "missing or empty; list at least one block device or file"),
        };
        let slot_offset = rl.slot_offset.map_or(0, |U64(o)| o);

        let output_dir = match raw.output_dir {
            Some(s) if s.is_empty() => return err("output_dir", "must not be empty"),
            Some(s) => PathBuf::from(s),
            None => return err("output_dir", "missing; give a directory for state, progress and outputs"),
        };

        let layout = raw.layout.map(|l| l.validate(n).map(|()| l)).transpose()?;

        let metrics_port = match raw.metrics_port {
            None => None,
            Some(U64(p)) if p == 0 || p > 65535 => {
                return err("metrics_port", format!("{p} is not a TCP port; use 1..65535"))
            }
            Some(U64(p)) => Some(p as u16),
        };
        let lotus = match raw.lotus {
            None => None,
            Some(RawLotus { miner: U64(miner), storage_id: id }) => {
                if id.is_empty() || id.len() > 128 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                    return err("lotus.storage_id", format!("{id:?}: give 1-128 letters, digits or '-' (a UUID)"));
                }
                if let Some(i) = sectors.iter().position(|s| s.prover_id != prover_id_of(miner)) {
                    return err(
                        format!("sectors[{i}].prover_id"),
                        format!("is not miner {miner}'s (lotus.miner): lotus and Curio would file the sector under another miner; seal it with f0{miner}'s prover id"),
                    );
                }
                Some(LotusStore { miner, storage_id: id })
            }
        };
        let hugepages_1gi = match raw.hugepages_1gi {
            None => 0,
            Some(U64(n)) if n <= 4096 => n as usize,
            Some(U64(n)) => {
                return err("hugepages_1gi", format!("{n} is more 1 GiB pages than any node has; give 0..4096"))
            }
        };
        let parent_cache_dir = match raw.parent_cache_dir {
            None => None,
            Some(p) if p.starts_with('/') => Some(PathBuf::from(p)),
            Some(p) => return err("parent_cache_dir", format!("{p:?} is not an absolute path")),
        };

        Ok(BatchConfig {
            sector_size,
            porep_id,
            api_version,
            features,
            sectors,
            layers: LayerPaths { paths, slot_offset },
            output_dir,
            layout,
            progress_file: raw.progress_file,
            metrics_port,
            metrics_address: raw.metrics_address.map_or(std::net::IpAddr::from([0, 0, 0, 0]), |Named(a)| a),
            lotus,
            hugepages_1gi,
            resident_bytes: raw.resident_bytes.map_or(0, |U64(b)| b),
            parent_cache_dir,
            pc2_engine: raw.pc2_engine.map_or(Pc2Engine::Cpu, |Named(e)| e),
            fillers: Default::default(),
        })
    }

    /// The registered proof this config seals, e.g. `StackedDrg8MiBV1_1` (from the porep id's
    /// proof id); it names the graph's parent cache in a node's cache directory.
    pub fn proof_name(&self) -> String {
        let id = u64::from_le_bytes(self.porep_id[..8].try_into().expect("8 bytes"));
        RegisteredProof::name_of(id).unwrap_or_else(|| format!("proof-{id}"))
    }

    /// Number of SDR layers for this sector size.
    pub fn num_layers(&self) -> usize {
        layers_for(self.sector_size).expect("validated")
    }

    /// Nodes per sector.
    pub fn nodes(&self) -> u64 {
        self.sector_size / 32
    }

    /// The layout to use: the config's, or the default for this machine.
    pub fn effective_layout(&self) -> Layout {
        self.layout.clone().unwrap_or_else(|| Layout::default_for(self.sectors.len()))
    }

    /// Serialise back to the JSON format accepted by [`BatchConfig::from_json`].
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "sector_size": self.sector_size,
            "porep_id": hex::encode(self.porep_id),
            "api_version": self.api_version.as_str(),
            "features": self.features.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
            "sectors": self.sectors.iter().map(|s| {
                let mut o = serde_json::json!({
                    "prover_id": hex::encode(s.prover_id),
                    "sector_id": s.sector_id,
                    "ticket": hex::encode(s.ticket),
                });
                if let Some(c) = s.comm_d { o["comm_d"] = hex::encode(c).into(); }
                if let Some(d) = &s.data {
                    o["data"] = serde_json::json!({
                        "path": d.path.display().to_string(),
                        "pieces": d.pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>(),
                    });
                }
                o
            }).collect::<Vec<_>>(),
            "layers": {
                "paths": self.layers.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "slot_offset": self.layers.slot_offset,
            },
            "output_dir": self.output_dir.display().to_string(),
        });
        if let Some(l) = &self.layout {
            v["layout"] = serde_json::to_value(l).unwrap();
        }
        if let Some(p) = &self.progress_file {
            v["progress_file"] = p.display().to_string().into();
        }
        if let Some(p) = self.metrics_port {
            v["metrics_port"] = p.into();
            v["metrics_address"] = self.metrics_address.to_string().into();
        }
        if let Some(p) = &self.parent_cache_dir {
            v["parent_cache_dir"] = p.display().to_string().into();
        }
        if self.pc2_engine != Pc2Engine::Cpu {
            v["pc2_engine"] = self.pc2_engine.as_str().into();
        }
        if self.hugepages_1gi > 0 {
            v["hugepages_1gi"] = self.hugepages_1gi.into();
        }
        if self.resident_bytes > 0 {
            v["resident_bytes"] = self.resident_bytes.into();
        }
        if let Some(l) = &self.lotus {
            v["lotus"] = serde_json::json!({"miner": l.miner, "storage_id": l.storage_id});
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sector_sizes_parse_by_name_or_bytes() {
        assert_eq!(parse_sector_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_sector_size("32gib"), Ok(32 << 30));
        assert_eq!(parse_sector_size("2048"), Ok(2048));
        let e = parse_sector_size("16MiB").unwrap_err();
        assert!(e.contains("\"16MiB\"") && e.contains("8388608 (8MiB)"), "{e}");
        assert!(parse_sector_size("4096").is_err());
    }

    fn base() -> serde_json::Value {
        serde_json::json!({
            "sector_size": 8388608, "porep_id": hex::encode(porep_id_for(6)), "api_version": "1.1.0",
            "features": [], "sectors": [{"prover_id": "00".repeat(32), "sector_id": 1234, "ticket": "11".repeat(32)}],
            "layers": {"paths": ["/dev/nvme1n1", "/data/l1.img"], "slot_offset": 0}, "output_dir": "/out"
        })
    }

    fn field_of(v: serde_json::Value) -> String {
        BatchConfig::from_json(&v.to_string()).unwrap_err().field
    }

    /// The field names a derived `Deserialize` asks for (serde hands them to
    /// `deserialize_struct`): what the sealer reads, without a second list to keep in step.
    pub(crate) fn read_keys<'de, T: Deserialize<'de>>() -> Vec<&'static str> {
        use serde::de::{self, Visitor};
        struct Probe(std::rc::Rc<std::cell::RefCell<Vec<&'static str>>>);
        impl<'de> de::Deserializer<'de> for Probe {
            type Error = de::value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(de::Error::custom("probe"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                self.0.borrow_mut().extend_from_slice(fields);
                Err(de::Error::custom("probe"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
                unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
            }
        }
        let keys = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let _ = T::deserialize(Probe(keys.clone()));
        let out = keys.borrow().clone();
        out
    }

    /// The operator's golden config (internal/render/testdata in the Go module) is the contract:
    /// it parses (so every rendered key is read), and it carries every key the sealer reads
    /// except the standalone ones (so every read key is rendered).
    #[test]
    fn operator_golden_config_is_the_contract() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../internal/render/testdata/sealer-config.golden.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let c = BatchConfig::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            (c.sector_size, c.api_version, c.features.clone()),
            (32 << 30, ApiVersion::V1_2_0, vec![Feature::SyntheticPoRep])
        );
        assert_eq!(c.porep_id, porep_id_for(13));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let missing = |keys: Vec<&'static str>, obj: &serde_json::Value, skip: &[&str]| -> Vec<&'static str> {
            keys.into_iter().filter(|k| !skip.contains(k) && obj.get(*k).is_none()).collect()
        };
        assert_eq!(
            missing(read_keys::<RawConfig>(), &v, &STANDALONE_KEYS),
            Vec::<&str>::new(),
            "config keys never rendered"
        );
        assert_eq!(
            missing(read_keys::<RawLayers>(), &v["layers"], &[]),
            Vec::<&str>::new(),
            "layers keys never rendered"
        );
        let with_comm_d = v["sectors"].as_array().unwrap().iter().find(|s| s.get("comm_d").is_some()).unwrap();
        assert_eq!(
            missing(read_keys::<RawSector>(), with_comm_d, &[]),
            Vec::<&str>::new(),
            "sector keys never rendered"
        );
        assert_eq!(
            missing(read_keys::<RawData>(), &with_comm_d["data"], &[]),
            Vec::<&str>::new(),
            "data keys never rendered"
        );
        assert_eq!(
            missing(read_keys::<RawPiece>(), &with_comm_d["data"]["pieces"][0], &[]),
            Vec::<&str>::new(),
            "piece keys never rendered"
        );
        assert_eq!(
            missing(read_keys::<Layout>(), &v["layout"], &["reason", "shared"]),
            Vec::<&str>::new(),
            "layout keys never rendered"
        );
        assert!(read_keys::<RawConfig>().len() > 8, "the probe must see the struct's fields");
        let mut bad = v.clone();
        bad["pc2_engine"] = "tpu".into();
        let e = BatchConfig::from_json(&bad.to_string()).unwrap_err();
        assert_eq!(e.field, "pc2_engine");
        assert!(e.message.contains("use \"cpu\" or \"gpu\""), "{e}");
        bad["pc2_engine"] = "gpu".into();
        assert_eq!(BatchConfig::from_json(&bad.to_string()).unwrap().pc2_engine, Pc2Engine::Gpu);
        bad["pc2_gpu"] = "0".into();
        assert!(BatchConfig::from_json(&bad.to_string()).unwrap_err().message.contains("pc2_gpu"));
    }

    #[test]
    fn lotus_store_needs_the_miners_prover_id() {
        assert_eq!(&prover_id_of(1000)[..3], &[0xe8, 0x07, 0]);
        assert_eq!(&prover_id_of(5)[..2], &[5, 0]);
        let mut v = base();
        v["sectors"][0]["prover_id"] = hex::encode(prover_id_of(1000)).into();
        v["lotus"] = serde_json::json!({"miner": 1000, "storage_id": "1b0c7d6e-5a4f-4e3d-9c2b-0a1f2e3d4c5b"});
        let c = BatchConfig::from_json(&v.to_string()).unwrap();
        let l = c.lotus.clone().unwrap();
        assert_eq!(l.sector_name(7), "s-t01000-7");
        assert_eq!(BatchConfig::from_json(&c.to_json().to_string()).unwrap().lotus, c.lotus);
        let mut other = v.clone();
        other["lotus"]["miner"] = 1001.into();
        let e = BatchConfig::from_json(&other.to_string()).unwrap_err();
        assert!(e.field == "sectors[0].prover_id" && e.message.contains("miner 1001"), "{e}");
        let mut bad = v.clone();
        bad["lotus"]["storage_id"] = "../x".into();
        assert_eq!(field_of(bad), "lotus.storage_id");
        let mut bad = v.clone();
        bad["lotus"]["path"] = "/x".into();
        assert_eq!(field_of(bad), "lotus.path", "an unknown key is named where it is");
    }

    #[test]
    fn data_sector_pieces_are_checked_before_any_io() {
        let mut v = base();
        let piece = |size: u64| serde_json::json!({"comm_p": "cd".repeat(32), "size": size});
        v["sectors"][0]["data"] = serde_json::json!({"path": "/deals/s-1", "pieces": [piece(2 << 20), piece(4 << 20)]});
        let c = BatchConfig::from_json(&v.to_string()).unwrap();
        let d = c.sectors[0].data.as_ref().unwrap();
        assert_eq!((d.path.to_str(), d.pieces.len(), d.pieces[1].size), (Some("/deals/s-1"), 2, 4 << 20));
        assert_eq!(c.sectors[0].comm_d, None, "computed from the pieces by sealer-data");
        // It survives the round trip through to_json.
        assert_eq!(BatchConfig::from_json(&c.to_json().to_string()).unwrap().sectors, c.sectors);
        // With data, a comm_d is kept for sealer-data to compare with the pieces'.
        v["sectors"][0]["comm_d"] = "ab".repeat(32).into();
        assert_eq!(BatchConfig::from_json(&v.to_string()).unwrap().sectors[0].comm_d, Some([0xab; 32]));
        for (data, field, words) in [
            (serde_json::json!({"path": "deals/s-1", "pieces": [piece(128)]}), "sectors[0].data.path", "absolute"),
            (serde_json::json!({"path": "/d", "pieces": []}), "sectors[0].data.pieces", "drop `data`"),
            (
                serde_json::json!({"path": "/d", "pieces": [piece(127)]}),
                "sectors[0].data.pieces[0].size",
                "power of two",
            ),
            (
                serde_json::json!({"path": "/d", "pieces": [piece(192)]}),
                "sectors[0].data.pieces[0].size",
                "power of two",
            ),
            // 1 MiB then 4 MiB: the second starts at 4 MiB (aligned), ending at 8 MiB; a third does not fit.
            (
                serde_json::json!({"path": "/d", "pieces": [piece(1 << 20), piece(4 << 20), piece(128)]}),
                "sectors[0].data.pieces[2].size",
                "sector holds",
            ),
            (
                serde_json::json!({"path": "/d", "pieces": [{"comm_p": "zz", "size": 128}]}),
                "sectors[0].data.pieces[0].comm_p",
                "",
            ),
            (
                serde_json::json!({"path": "/d", "pieces": [{"size": 128}]}),
                "sectors[0].data.pieces[0].comm_p",
                "missing",
            ),
            (
                serde_json::json!({"path": "/d", "pieces": [piece(128)], "unsealed": true}),
                "sectors[0].data.unsealed",
                "unsealed",
            ),
        ] {
            v["sectors"][0]["data"] = data;
            let e = BatchConfig::from_json(&v.to_string()).unwrap_err();
            assert_eq!(e.field, field, "{}", e.message);
            assert!(e.message.contains(words), "{field}: {}", e.message);
        }
    }

    #[test]
    fn comm_d_without_data_is_refused_naming_the_sector() {
        // A second sector carries a foreign comm_d: the error names it and its sector number.
        let mut v = base();
        let mut other = v["sectors"][0].clone();
        other["sector_id"] = 77.into();
        other["comm_d"] = "ab".repeat(32).into();
        v["sectors"] = serde_json::json!([v["sectors"][0].clone(), other]);
        let e = BatchConfig::from_json(&v.to_string()).unwrap_err();
        assert_eq!(e.field, "sectors[1].comm_d");
        assert!(
            e.message.contains("sector 77") && e.message.contains("omit comm_d") && e.message.contains("`data`"),
            "{}",
            e.message
        );
        // The CC commitment of the sector size is what the sealer uses anyway: accepted.
        v["sectors"][1]["comm_d"] = hex::encode(sealer_hash::cc_comm_d(8 << 20)).into();
        let c = BatchConfig::from_json(&v.to_string()).unwrap();
        assert_eq!(c.sectors[1].comm_d, Some(sealer_hash::cc_comm_d(8 << 20)));
        // The CC commitment of another size is foreign to this one.
        v["sectors"][1]["comm_d"] = hex::encode(sealer_hash::cc_comm_d(2048)).into();
        assert_eq!(field_of(v), "sectors[1].comm_d");
    }

    #[test]
    fn parses_issue_example() {
        let c = BatchConfig::from_json(&base().to_string()).unwrap();
        assert_eq!(c.sector_size, 8 << 20);
        assert_eq!(c.num_layers(), 2);
        assert_eq!(c.sectors[0].sector_id, 1234);
        assert_eq!(c.layers.paths.len(), 2);
    }

    #[test]
    fn metrics_address_defaults_to_all_and_is_checked() {
        let c = BatchConfig::from_json(&base().to_string()).unwrap();
        assert_eq!(c.metrics_address.to_string(), "0.0.0.0");
        let mut v = base();
        v["metrics_port"] = 9464.into();
        v["metrics_address"] = "127.0.0.1".into();
        let c = BatchConfig::from_json(&v.to_string()).unwrap();
        assert_eq!(c.metrics_address.to_string(), "127.0.0.1");
        let again = BatchConfig::from_json(&c.to_json().to_string()).unwrap();
        assert_eq!(again.metrics_address, c.metrics_address);
        v["metrics_address"] = "localhost:1".into();
        assert_eq!(field_of(v), "metrics_address");
    }

    #[test]
    fn registered_proof_fills_fields() {
        let v = serde_json::json!({
            "registered_proof": "StackedDrg32GiBV1_1",
            "sectors": [{"prover_id": "00".repeat(32), "sector_id": 1, "ticket": "11".repeat(32)}],
            "layers": {"paths": ["/x"]}, "output_dir": "/out"
        });
        let c = BatchConfig::from_json(&v.to_string()).unwrap();
        assert_eq!(c.sector_size, 32 << 30);
        assert_eq!(c.porep_id[0], 8);
        assert_eq!(c.api_version, ApiVersion::V1_1_0);
        assert_eq!(c.num_layers(), 11);
        let r = RegisteredProof::parse("StackedDrg8MiBV1_1_Feat_SyntheticPoRep").unwrap();
        assert_eq!((r.proof_id, r.api_version), (11, ApiVersion::V1_2_0));
        assert_eq!(RegisteredProof::parse("StackedDrg2KiBV1").unwrap().proof_id, 0);
        assert_eq!(RegisteredProof::parse("StackedDrg64GiBV1_2_Feat_NonInteractivePoRep").unwrap().proof_id, 19);
    }

    #[test]
    fn errors_name_the_field() {
        let mut v = base();
        v["sector_size"] = 1000.into();
        assert_eq!(field_of(v), "sector_size");
        let mut v = base();
        v["porep_id"] = "abc".into();
        assert_eq!(field_of(v), "porep_id");
        let mut v = base();
        v["api_version"] = "2.0".into();
        assert_eq!(field_of(v), "api_version");
        let mut v = base();
        v["sectors"][0]["ticket"] = "zz".into();
        assert_eq!(field_of(v), "sectors[0].ticket");
        let mut v = base();
        let s0 = v["sectors"][0].clone();
        v["sectors"].as_array_mut().unwrap().push(s0.clone());
        v["sectors"][1]["sector_id"] = 5.into();
        v["sectors"].as_array_mut().unwrap().push(s0);
        assert_eq!(field_of(v), "sectors");
        let mut v = base();
        v["layers"]["paths"] = serde_json::json!([]);
        assert_eq!(field_of(v), "layers.paths");
        let mut v = base();
        v["features"] = serde_json::json!(["SyntheticPoRep"]);
        assert_eq!(field_of(v), "features");
        let mut v = base();
        v["registered_proof"] = "StackedDrg2KiBV1".into();
        assert_eq!(field_of(v), "sector_size");
        let mut v = base();
        v.as_object_mut().unwrap().remove("output_dir");
        assert_eq!(field_of(v), "output_dir");
    }

    #[test]
    fn layout_from_calculator_json() {
        let mut v = base();
        v["sectors"] = serde_json::json!((0..4)
            .map(|i| serde_json::json!({"prover_id": "00".repeat(32), "sector_id": i, "ticket": "11".repeat(32)}))
            .collect::<Vec<_>>());
        v["layout"] = serde_json::json!({"batch_size": 4, "supported": true,
            "coordinators": [{"cpu": 0, "hashers": [{"cpu": 1, "sectors": 2}, {"cpu": 1, "sectors": 2}]}],
            "roles": {"writer": 0, "reader": 0, "orchestrator": 0, "pc2_reader": 2, "pc2_hasher": 9, "pc2_hasher_cpu": 3,
                "pc2_writer": 4, "c1_reader": 5}});
        let c = BatchConfig::from_json(&v.to_string()).unwrap();
        assert_eq!(c.layout.as_ref().unwrap().coordinators[0].hashers.len(), 2);
        for (key, path) in [("extra", "/layout/extra"), ("sibling", "/layout/coordinators/0/hashers/0/sibling")] {
            let mut bad = v.clone();
            let (parent, leaf) = path.rsplit_once('/').unwrap();
            bad.pointer_mut(parent).unwrap()[leaf] = 1.into();
            let e = BatchConfig::from_json(&bad.to_string()).unwrap_err();
            assert!(e.field == "layout" && e.message.contains(key), "{key}: {e}");
        }
        let mut v2 = v.clone();
        v2["layout"]["batch_size"] = 8.into();
        assert_eq!(field_of(v2), "layout.batch_size");
        let mut v3 = v.clone();
        v3["layout"]["coordinators"][0]["hashers"][0]["sectors"] = 1.into();
        assert_eq!(field_of(v3), "layout.coordinators");
        let mut v4 = v;
        v4["layout"]["supported"] = false.into();
        assert_eq!(field_of(v4), "layout.supported");
    }
}
