//! SyntheticPoRep after PC2: each sector's `syn-porep-vanilla-proofs.dat`, the file
//! filecoin-proofs' `generate_synth_proofs` writes, byte for byte, by a streaming writer
//! ([`stream`]) in bounded memory with all the pod's CPUs, its labels read from the slot
//! ([`labels`]); after it the layers are no longer needed: C1 of a SyntheticPoRep sector
//! reads the stored proofs, not the labels, and the slot can go. [`cost`] is what that takes
//! per sector (memory, file, CPU), for `sealer plan`, progress and the operator's prediction
//! (`contracts/synth-costs.json`).

use anyhow::Context;
use filecoin_proofs::{with_shape, PoRepConfig, SealPreCommitOutput};
use sealer_config::{BatchConfig, Feature};
use std::path::{Path, PathBuf};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;

mod challenges;
pub mod labels;
pub mod shape;
pub mod stream;

/// The file filecoin-proofs writes in a sector's cache directory.
pub const SYNTH_PROOFS_FILE: &str = "syn-porep-vanilla-proofs.dat";

/// filecoin-proofs' `DEFAULT_SYNTH_CHALLENGE_COUNT`: a sector has min(nodes, 2^18) synthetic
/// challenges, so every size from 8 MiB up has the same count.
pub const SYNTH_CHALLENGES_MAX: u64 = 1 << 18;

/// filecoin-proofs' `generate_synth_proofs` of one 8 MiB sector, CPU-seconds measured by
/// `sealer bench synth` on the 2-vCPU EPYC (2,608 s wall, 18.4 GB peak RSS), and its model at
/// 32 GiB (Poseidon hashes per challenge, 397 vs 273): what the bench's prediction compares with.
pub const FILECOIN_PROOFS_CPU_SECONDS_8MIB: f64 = 5122.0;
/// See [`FILECOIN_PROOFS_CPU_SECONDS_8MIB`].
pub const FILECOIN_PROOFS_CPU_SECONDS_32GIB: f64 = FILECOIN_PROOFS_CPU_SECONDS_8MIB * 397.0 / 273.0;

/// The streaming writer's CPU-seconds per byte of record (reads, copies, the column and
/// encoding checks) and per arity-8 Poseidon hash (the tree-r-last segments a challenge
/// rebuilds), measured by `sealer bench synth` on the 2-vCPU EPYC of the README: 124 µs per
/// 8 MiB challenge (23,704-byte records, 0.14 hashes each), 12,281 arity-8 hashes per CPU-s.
const CPU_SECONDS_PER_RECORD_BYTE: f64 = 4.8e-9;
/// See [`CPU_SECONDS_PER_RECORD_BYTE`].
const CPU_SECONDS_PER_POSEIDON8: f64 = 81.0e-6;

/// What one sector's synthetic proofs cost with the streaming writer ([`stream`]): memory is
/// bounded per sector whatever its size, the sectors of a batch are proved one after another,
/// each with all the pod's CPUs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SynthCost {
    /// Synthetic challenges: min(nodes, 2^18).
    pub challenges: u64,
    /// Peak memory of the sector's proofs, bytes ([`stream::memory_bound`]).
    pub peak_memory_bytes: u64,
    /// Bytes of its [`SYNTH_PROOFS_FILE`] (6.2 GB at 8 MiB, 11.2 GB at 32 GiB).
    pub file_bytes: u64,
    /// CPU-seconds of its proofs (divide by the CPUs for the wall time).
    pub cpu_seconds: f64,
}

/// The synthetic proofs of one sector of `sector_size` bytes; None for a size filecoin-proofs
/// does not seal.
pub fn cost(sector_size: u64) -> Option<SynthCost> {
    let shape = shape::Shape::of(sector_size, sealer_config::layers_for(sector_size)?);
    let challenges = shape.nodes.min(SYNTH_CHALLENGES_MAX);
    let rb = shape.record_bytes() as u64;
    let hashes = stream::segment_hashes_per_challenge(&shape, challenges);
    Some(SynthCost {
        challenges,
        peak_memory_bytes: stream::memory_bound(&shape),
        file_bytes: 96 + challenges * rb,
        cpu_seconds: challenges as f64 * (rb as f64 * CPU_SECONDS_PER_RECORD_BYTE + hashes * CPU_SECONDS_PER_POSEIDON8),
    })
}

/// The CPUs a batch's synthetic proofs are assumed to run on: the distinct CPUs of its
/// effective layout (the pod's), at least 1.
pub fn cpus(cfg: &BatchConfig) -> usize {
    cfg.effective_layout().cpus().len().max(1)
}

/// Wall seconds of one sector's synthetic proofs of `cfg` on its [`cpus`]; None for a size
/// without a [`cost`].
pub fn seconds_per_sector(cfg: &BatchConfig) -> Option<f64> {
    cost(cfg.sector_size).map(|c| c.cpu_seconds / cpus(cfg) as f64)
}

/// True when the config seals SyntheticPoRep sectors.
pub fn enabled(cfg: &BatchConfig) -> bool {
    cfg.features.contains(&Feature::SyntheticPoRep)
}

/// The layer files of a sector's cache directory, as filecoin-proofs names them.
pub fn layer_paths(cache: &Path, layers: usize) -> Vec<PathBuf> {
    (1..=layers).map(|l| cache.join(format!("sc-02-data-layer-{l}.dat"))).collect()
}

/// Write one sector's synthetic vanilla proofs into `cache` with the streaming writer
/// ([`stream`]), its labels from the layer files in `cache` when PC2 kept them, else from the
/// batch's slot; then remove the layer files. Resumable: a sector whose file exists is done
/// (the file is named only when whole), a partial one is continued.
pub fn write_sector(
    cfg: &BatchConfig,
    sector: usize,
    cache: &Path,
    sealed: &Path,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
) -> anyhow::Result<()> {
    write_sector_with(cfg, sector, cache, sealed, comm_r, comm_d, &mut |_, _| Ok(())).map(|_| ())
}

/// [`write_sector`], telling `progress` the challenges done after each chunk; returns what the
/// writer did (None when the file was there).
#[allow(clippy::too_many_arguments)]
pub fn write_sector_with(
    cfg: &BatchConfig,
    sector: usize,
    cache: &Path,
    sealed: &Path,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    progress: stream::Progress,
) -> anyhow::Result<Option<stream::Written>> {
    let s = &cfg.sectors[sector];
    let layers = layer_paths(cache, cfg.num_layers());
    let out = cache.join(SYNTH_PROOFS_FILE);
    let remove_layers = || -> anyhow::Result<()> {
        for l in layers.iter().filter(|l| l.exists()) {
            std::fs::remove_file(l).with_context(|| format!("removing {}", l.display()))?;
        }
        Ok(())
    };
    if out.exists() {
        remove_layers()?;
        return Ok(None);
    }
    // A data sector's pieces must make its comm_d, as filecoin-proofs checks.
    if let Some(d) = &s.data {
        let want = sealer_data::pieces_comm_d(cfg.sector_size, &d.pieces).map_err(anyhow::Error::msg)?;
        anyhow::ensure!(want == comm_d, "sector {}: its pieces do not make the comm_d given", s.sector_id);
    }
    let parents = sealer_slot::open_parents(cfg).map_err(|e| anyhow::anyhow!("{e}"))?;
    let input = stream::SectorInput {
        cache,
        sealed,
        sector_size: cfg.sector_size,
        layers: cfg.num_layers(),
        replica_id: sealer_hash::replica_id(&s.prover_id, s.sector_id, &s.ticket, &comm_d, &cfg.porep_id),
        comm_r,
        comm_d,
        parents: &parents,
    };
    let written = match labels::LayerFiles::open(cache, cfg.num_layers())? {
        Some(mut files) => stream::write(&input, &mut files, &out, progress),
        None => {
            let mut reader = sealer_slot::LayerReader::open(cfg).map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut slot = labels::SlotLabels::new(&mut reader, sector, cfg.num_layers());
            stream::write(&input, &mut slot, &out, progress)
        }
    }
    .with_context(|| format!("sector {}: synthetic proofs", s.sector_id))?;
    remove_layers()?;
    Ok(Some(written))
}

/// filecoin-proofs' own `generate_synth_proofs` on one sector's outputs (its layer files must
/// be in `cache`; they stay): the oracle of the tests and the baseline of `sealer bench synth`.
pub fn write_with_filecoin_proofs(
    cfg: &BatchConfig,
    sector: usize,
    cache: &Path,
    sealed: &Path,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
) -> anyhow::Result<()> {
    let s = &cfg.sectors[sector];
    let proofs = cache.join(SYNTH_PROOFS_FILE);
    let _ = std::fs::remove_file(&proofs);
    let pc = crate::porep::porep_config(cfg)?;
    let pre = filecoin_proofs::SealPreCommitOutput { comm_r, comm_d };
    let id = SectorId::from(s.sector_id);
    let pieces = match &s.data {
        Some(d) => sealer_data::piece_infos(cfg.sector_size, &d.pieces).map_err(anyhow::Error::msg)?,
        None => vec![],
    };
    with_shape!(cfg.sector_size, generate, &pc, cache, sealed, s.prover_id, id, s.ticket, pre, &pieces)
        .with_context(|| format!("sector {}: generate_synth_proofs", s.sector_id))?;
    anyhow::ensure!(proofs.exists(), "sector {}: filecoin-proofs wrote no {SYNTH_PROOFS_FILE}", s.sector_id);
    Ok(())
}

/// `generate_synth_proofs` for one tree shape.
#[allow(clippy::too_many_arguments)]
fn generate<Tree: 'static + MerkleTreeTrait>(
    pc: &PoRepConfig,
    cache: &Path,
    sealed: &Path,
    prover_id: [u8; 32],
    id: SectorId,
    ticket: [u8; 32],
    pre: SealPreCommitOutput,
    pieces: &[filecoin_proofs::PieceInfo],
) -> anyhow::Result<()> {
    filecoin_proofs::generate_synth_proofs::<_, Tree>(pc, cache, sealed, prover_id, id, ticket, pre, pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The costs the operator's prediction and pod memory use (contracts/synth-costs.json,
    /// which internal/predict reads too) are this model's.
    #[test]
    fn cost_is_the_contract() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/synth-costs.json");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let sizes = doc["sizes"].as_array().unwrap();
        assert_eq!(sizes.len(), sealer_config::SECTOR_SIZES.len());
        for e in sizes {
            let c = cost(e["sector_size"].as_u64().unwrap()).unwrap();
            assert_eq!(e["challenges"].as_u64().unwrap(), c.challenges, "{e}");
            assert_eq!(e["peak_memory_bytes"].as_u64().unwrap(), c.peak_memory_bytes, "{e}");
            assert_eq!(e["file_bytes"].as_u64().unwrap(), c.file_bytes, "{e}");
            assert_eq!(e["cpu_seconds"].as_f64().unwrap(), (c.cpu_seconds * 10.0).round() / 10.0, "{e}");
        }
        let c = cost(32 << 30).unwrap();
        assert_eq!(c.challenges, 262_144);
        assert_eq!(c.file_bytes, 96 + 262_144 * 42_744); // ≈ 11.2e9
        assert!(c.peak_memory_bytes < 1 << 30);
        assert_eq!(cost(2048).unwrap().challenges, 64);
        assert_eq!(cost(4096), None);
    }

    /// Prints the contract's sizes from the model (`cargo test -p sealer-proofs -- --ignored
    /// --nocapture print_contract` after changing a constant).
    #[test]
    #[ignore]
    fn print_contract() {
        let sizes: Vec<_> = sealer_config::SECTOR_SIZES
            .iter()
            .map(|s| {
                let c = cost(s.0).unwrap();
                serde_json::json!({"sector_size": s.0, "challenges": c.challenges, "peak_memory_bytes": c.peak_memory_bytes,
                    "file_bytes": c.file_bytes, "cpu_seconds": (c.cpu_seconds * 10.0).round() / 10.0})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"sizes": sizes})).unwrap());
    }
}
