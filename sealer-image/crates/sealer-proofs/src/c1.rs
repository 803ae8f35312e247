//! C1 (seal commit phase 1) on the sealer's outputs, written as `commit-phase1-output` in the
//! sector's cache directory: the serde JSON of filecoin-proofs-api's `SealCommitPhase1Output`,
//! the bytes filecoin-ffi returns from C1 and lotus and Curio hand to C2. Its vanilla proofs are
//! made and checked by filecoin-proofs' own `seal_commit_phase1`; the JSON around them is
//! written here in the api crate's layout (`ApiC1Output`: that crate compiles every proof of
//! every sector size, a seventh of a cold build of the sealer), and the tests hold it byte-equal
//! to filecoin-proofs-api's.
//!
//! - NI-PoRep: no interactive seed (its challenges come from comm_r), so C1 runs right after
//!   PC2 on the layer files PC2 wrote, which are removed afterwards ([`write_sector`]).
//! - V1_1 (interactive): the seed comes about 150 epochs after precommit. The layers stay in the
//!   slot, not in the cache directories; once the seeds are known, [`from_slot`] writes each
//!   sector's layer files holding only the labels C1 opens (its challenges' and their parents'
//!   columns, every layer; the rest of each file is a hole), runs C1, and removes them.
//! - SyntheticPoRep: the seed comes the same way, but C1 reads the sector's stored synthetic
//!   proofs, written before the layers went; [`from_synthetic_proofs`] needs no slot.

use anyhow::Context;
use filecoin_hashers::{poseidon::PoseidonDomain, Domain};
use filecoin_proofs::{with_shape, PoRepConfig, SealPreCommitOutput};
use sealer_config::{BatchConfig, Feature};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::Challenges;

/// The seeds file `sealer c1 --seeds` reads, as the operator writes it (the contract
/// `contracts/c1-seeds.json`): `{"sectors": [{"sector_id": N, "seed": "<64 hex>"}]}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedsFile {
    sectors: Vec<SeedEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedEntry {
    sector_id: u64,
    seed: String,
}

/// Each seeded sector of a seeds file, in order: its number and its 32-byte seed. The error
/// names the key and the fix.
pub fn parse_seeds(text: &str) -> Result<Vec<(u64, [u8; 32])>, String> {
    let file: SeedsFile = serde_json::from_str(text)
        .map_err(|e| format!("{e}: want {{\"sectors\": [{{\"sector_id\": N, \"seed\": \"<64 hex>\"}}]}}"))?;
    file.sectors
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let seed = hex::decode(&s.seed)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| format!("sectors[{i}].seed: want 32 bytes as 64 hex characters"))?;
            Ok((s.sector_id, seed))
        })
        .collect()
}

/// The C1 output file in a sector's cache directory.
pub const C1_OUTPUT_FILE: &str = "commit-phase1-output";

/// True when the config seals NI-PoRep sectors.
pub fn enabled(cfg: &BatchConfig) -> bool {
    cfg.features.contains(&Feature::NonInteractivePoRep)
}

/// filecoin-proofs-api's `SealCommitPhase1Output` as serde writes it: the registered proof's
/// name, the vanilla proofs under the variant of its `VanillaSealProof` enum (one per sector
/// size, `StackedDrg<size>V1` for every version and feature), then filecoin-proofs' own output
/// fields in their order.
#[derive(serde::Serialize)]
struct ApiC1Output<'a, Proofs: serde::Serialize, Domain: serde::Serialize> {
    registered_proof: &'a str,
    vanilla_proofs: BTreeMap<String, &'a Proofs>,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    replica_id: Domain,
    seed: [u8; 32],
    ticket: [u8; 32],
}

/// The api's `VanillaSealProof` variant of a sector size.
fn vanilla_variant(sector_size: u64) -> anyhow::Result<String> {
    let (_, name, _, _) = sealer_config::SECTOR_SIZES
        .iter()
        .find(|s| s.0 == sector_size)
        .with_context(|| format!("no C1 for sector size {sector_size}"))?;
    Ok(format!("StackedDrg{name}V1"))
}

/// What C1 of one sector takes, besides the tree shape.
struct C1Input<'a> {
    pc: &'a PoRepConfig,
    proof_name: &'a str,
    cache: &'a Path,
    sealed: &'a Path,
    prover_id: [u8; 32],
    id: SectorId,
    ticket: [u8; 32],
    seed: [u8; 32],
    pre: SealPreCommitOutput,
    pieces: &'a [filecoin_proofs::PieceInfo],
    /// Check the cache's layers and trees first (not for SyntheticPoRep, whose C1 reads its
    /// stored proofs and no layer).
    validate: bool,
}

/// filecoin-proofs' C1 of one sector with the tree shape of its size, as the api's JSON (the api
/// checks the cache for the layers and trees first, as here).
fn commit_phase1_json<Tree: 'static + MerkleTreeTrait>(i: &C1Input) -> anyhow::Result<Vec<u8>> {
    if i.validate {
        filecoin_proofs::validate_cache_for_commit::<_, _, Tree>(i.cache, i.sealed)?;
    }
    let out = filecoin_proofs::seal_commit_phase1::<_, Tree>(
        i.pc,
        i.cache,
        i.sealed,
        i.prover_id,
        i.id,
        i.ticket,
        i.seed,
        i.pre.clone(),
        i.pieces,
    )?;
    let json = ApiC1Output {
        registered_proof: i.proof_name,
        vanilla_proofs: BTreeMap::from([(vanilla_variant(u64::from(i.pc.sector_size))?, &out.vanilla_proofs)]),
        comm_r: out.comm_r,
        comm_d: out.comm_d,
        replica_id: out.replica_id,
        seed: out.seed,
        ticket: out.ticket,
    };
    Ok(serde_json::to_vec(&json)?)
}

/// Write one sector's C1 output into `cache` (its layers must be there) and remove its layer
/// files. Resumable: a sector whose layers are gone and whose output exists is done.
pub fn write_sector(
    cfg: &BatchConfig,
    sector: usize,
    cache: &Path,
    sealed: &Path,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
) -> anyhow::Result<()> {
    let s = &cfg.sectors[sector];
    let layers = layer_files(cfg, cache);
    let out = cache.join(C1_OUTPUT_FILE);
    if out.exists() && layers.iter().all(|l| !l.exists()) {
        return Ok(());
    }
    anyhow::ensure!(
        layers.iter().all(|l| l.exists()),
        "sector {}: the layer files are not in {} (C1 reads them; run PC2 with layer files)",
        s.sector_id,
        cache.display()
    );
    // NI-PoRep ignores the seed; filecoin-ffi callers pass zeros.
    let seeded = SeededSector { index: sector, seed: [0; 32], comm_r, comm_d };
    commit_and_clear(cfg, &seeded, cache, sealed, &layers)
}

/// seal_commit_phase1 on the files in `cache`, its output written there, then the layer files
/// removed.
fn commit_and_clear(
    cfg: &BatchConfig,
    seeded: &SeededSector,
    cache: &Path,
    sealed: &Path,
    layers: &[PathBuf],
) -> anyhow::Result<()> {
    let SeededSector { index, seed, comm_r, comm_d } = *seeded;
    let s = &cfg.sectors[index];
    let out = cache.join(C1_OUTPUT_FILE);
    let pieces = match &s.data {
        Some(d) => sealer_data::piece_infos(cfg.sector_size, &d.pieces).map_err(anyhow::Error::msg)?,
        None => vec![],
    };
    let pc = crate::porep::porep_config(cfg)?;
    let input = C1Input {
        pc: &pc,
        proof_name: &cfg.proof_name(),
        cache,
        sealed,
        prover_id: s.prover_id,
        id: SectorId::from(s.sector_id),
        ticket: s.ticket,
        seed,
        pre: SealPreCommitOutput { comm_r, comm_d },
        pieces: &pieces,
        validate: !crate::synth::enabled(cfg),
    };
    let c1 = with_shape!(cfg.sector_size, commit_phase1_json, &input)
        .with_context(|| format!("sector {}: seal_commit_phase1", s.sector_id))?;
    // Synced, renamed and its directory synced before the layers it came from are removed.
    sealer_storage::durable::replace(&out, &c1).with_context(|| format!("writing {}", out.display()))?;
    for l in layers {
        std::fs::remove_file(l).with_context(|| format!("removing {}", l.display()))?;
    }
    Ok(())
}

/// One sector's seed for C1 from the slot, with the commitments its PC2 reported.
#[derive(Clone, Debug)]
pub struct SeededSector {
    /// Index of the sector in the config.
    pub index: usize,
    /// The interactive seed (chain randomness at the seed epoch).
    pub seed: [u8; 32],
    /// comm_r and comm_d from PC2.
    pub comm_r: [u8; 32],
    /// See `comm_r`.
    pub comm_d: [u8; 32],
}

/// Storage-proofs' interactive challenges of a config's proof: the same for every sector of
/// the batch, so derived once.
struct ChallengePlan {
    challenges: Challenges,
    nodes: usize,
    partitions: usize,
}

impl ChallengePlan {
    fn of(cfg: &BatchConfig) -> anyhow::Result<Self> {
        let pc = crate::porep::porep_config(cfg)?;
        let sp = filecoin_proofs::parameters::setup_params(&pc)?;
        anyhow::ensure!(
            matches!(sp.challenges, Challenges::Interactive(_)),
            "{}: C1 from the slot is for interactive (V1, V1_1) proofs",
            cfg.proof_name()
        );
        Ok(ChallengePlan { challenges: sp.challenges, nodes: sp.nodes, partitions: usize::from(pc.partitions) })
    }

    /// The nodes whose labels (every layer) C1 of a sector opens: each challenge of every
    /// partition (from the replica id and seed) and its 14 parents.
    fn nodes(
        &self,
        replica_id: &[u8; 32],
        seed: &[u8; 32],
        parents: &sealer_graph::Parents,
    ) -> anyhow::Result<BTreeSet<u64>> {
        let Challenges::Interactive(challenges) = &self.challenges else {
            unreachable!("checked in ChallengePlan::of")
        };
        let rid = PoseidonDomain::try_from_bytes(replica_id).context("replica id")?;
        let mut nodes = BTreeSet::new();
        for k in 0..self.partitions {
            for c in challenges.derive(self.nodes, &rid, seed, k as u8) {
                nodes.insert(c as u64);
                nodes.extend(parents.get(c as u64).iter().map(|&p| p as u64));
            }
        }
        Ok(nodes)
    }
}

/// SyntheticPoRep C1 for the seeded sectors: filecoin-proofs' C1 takes each sector's records
/// for the seed from its stored synthetic proofs (written after PC2, before the layers went),
/// so it needs neither the slot nor layer files. Sectors whose output exists are skipped; a
/// sector without its proofs file is an error naming it. Returns each sector's output path.
pub fn from_synthetic_proofs(cfg: &BatchConfig, seeded: &[SeededSector]) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    anyhow::ensure!(crate::synth::enabled(cfg), "{}: C1 from synthetic proofs is for SyntheticPoRep", cfg.proof_name());
    let mut out = Vec::with_capacity(seeded.len());
    for s in seeded {
        let id = cfg.sectors[s.index].sector_id;
        let p = sealer_config::sector_paths(cfg, id);
        let done = p.cache.join(C1_OUTPUT_FILE);
        if !done.exists() {
            let proofs = p.cache.join(crate::synth::SYNTH_PROOFS_FILE);
            anyhow::ensure!(
                proofs.exists(),
                "sector {id}: no {} in {}: its synthetic proofs were not written (the batch did not finish)",
                crate::synth::SYNTH_PROOFS_FILE,
                p.cache.display()
            );
            commit_and_clear(cfg, s, &p.cache, &p.sealed, &[])?;
            log::info!("sector {id}: C1 output written from its synthetic proofs");
        }
        out.push((id, done));
    }
    Ok(out)
}

/// The layer files of a sector's cache directory, as filecoin-proofs names them.
fn layer_files(cfg: &BatchConfig, cache: &Path) -> Vec<PathBuf> {
    (1..=cfg.num_layers()).map(|l| cache.join(format!("sc-02-data-layer-{l}.dat"))).collect()
}

/// V1_1 C1 for the seeded sectors, reading the labels from the slot: per sector, its layer
/// files are written sparse (only the labels of its challenges and their parents, each page of
/// the slot read once for all sectors that need it), C1 runs on them and they are removed.
/// Sectors whose output exists are skipped (resumable; sparse files a crash left are removed).
/// Returns each sector's output path.
pub fn from_slot(
    cfg: &BatchConfig,
    seeded: &[SeededSector],
    reader: &mut sealer_slot::LayerReader,
    parents: &sealer_graph::Parents,
) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    let plan = ChallengePlan::of(cfg)?;
    let (rids, _) = sealer_slot::sector_ids(cfg);
    let mut out = Vec::with_capacity(seeded.len());
    let mut todo = Vec::new();
    for s in seeded {
        let id = cfg.sectors[s.index].sector_id;
        let p = sealer_config::sector_paths(cfg, id);
        let done = p.cache.join(C1_OUTPUT_FILE);
        out.push((id, done.clone()));
        if done.exists() {
            for l in layer_files(cfg, &p.cache) {
                let _ = std::fs::remove_file(l);
            }
        } else {
            let nodes = plan.nodes(&rids[s.index], &s.seed, parents)?;
            todo.push((s, layer_files(cfg, &p.cache), p, nodes));
        }
    }
    let union: BTreeSet<u64> = todo.iter().flat_map(|(.., n)| n.iter().copied()).collect();
    let mut page = sealer_storage::AlignedBuf::new(4096);
    // One layer at a time: a file per sector open, not one per sector and layer.
    for layer in 1..=cfg.num_layers() {
        let files = todo
            .iter()
            .map(|(_, paths, ..)| {
                let path = &paths[layer - 1];
                let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
                f.set_len(cfg.sector_size).with_context(|| format!("sizing {}", path.display()))?;
                Ok(f)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        for &v in &union {
            let row = reader.read_row(layer as u32, v, &mut page).map_err(|e| anyhow::anyhow!("{e}"))?;
            for ((s, .., nodes), f) in todo.iter().zip(&files) {
                if nodes.contains(&v) {
                    f.write_all_at(&row[s.index * 32..s.index * 32 + 32], v * 32).context("writing a label")?;
                }
            }
        }
    }
    for (s, paths, p, _) in &todo {
        commit_and_clear(cfg, s, &p.cache, &p.sealed, paths)?;
        log::info!("sector {}: C1 output written", cfg.sectors[s.index].sector_id);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_seeds;

    /// The operator's seeds file (contracts/c1-seeds.json, which its render test writes) parses
    /// into each sector's seed; an unknown key or a short seed is refused naming it.
    #[test]
    fn seeds_file_is_the_operators_contract() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/c1-seeds.json");
        let seeds = parse_seeds(&std::fs::read_to_string(path).unwrap()).unwrap();
        let want: [u8; 32] = std::array::from_fn(|i| i as u8 + 1);
        assert_eq!(seeds, vec![(7, [0xab; 32]), (8, want)]);
        let e = parse_seeds(r#"{"sectors": [{"sector_id": 1, "seed": "ab", "epoch": 3}]}"#).unwrap_err();
        assert!(e.contains("unknown field `epoch`"), "{e}");
        let e = parse_seeds(r#"{"sectors": [{"sector_id": 1, "seed": "ab"}]}"#).unwrap_err();
        assert!(e.contains("sectors[0].seed"), "{e}");
    }
}
