//! SyntheticPoRep after PC2: each sector's `syn-porep-vanilla-proofs.dat`, written by
//! filecoin-proofs' own `generate_synth_proofs` on the sealer's outputs (so it is the file
//! filecoin-proofs would write), after which the layer files are no longer needed: C1 of a
//! SyntheticPoRep sector reads the stored proofs, not the labels, and the slot can go.
//! [`cost`] is what that takes per sector (memory, file, CPU), for `sealer plan` and progress.

use anyhow::Context;
use filecoin_proofs::{with_shape, PoRepConfig, SealPreCommitOutput};
use sealer_config::{BatchConfig, Feature};
use std::path::Path;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;

/// The file filecoin-proofs writes in a sector's cache directory.
pub const SYNTH_PROOFS_FILE: &str = "syn-porep-vanilla-proofs.dat";

/// filecoin-proofs' `DEFAULT_SYNTH_CHALLENGE_COUNT`: a sector has min(nodes, 2^18) synthetic
/// challenges, so every size from 8 MiB up has the same count.
pub const SYNTH_CHALLENGES_MAX: u64 = 1 << 18;

/// CPU-seconds of one 8 MiB sector's synthetic proofs (2^18 challenges), measured: 14 min on
/// 2 CPUs. Other sizes scale by their challenges × Poseidon hashes per challenge.
pub const CPU_SECONDS_8MIB: f64 = 1700.0;

/// One synthetic challenge of a sector size in filecoin-proofs 19.1.0 (sector size, Poseidon
/// hashes of its proof and the proof's own check, bytes the proof and the copy queued for its
/// check hold in memory, bytes of its record in [`SYNTH_PROOFS_FILE`]). From the source
/// (storage-proofs-porep stacked/vanilla/proof.rs `prove_layers` / `write_synth_proofs`,
/// params.rs `proof_size`); the 8 MiB memory matches the 18 GB measured. The operator's
/// prediction (internal/predict/predict.go, `synthCosts`) holds the same numbers.
const PER_CHALLENGE: [(u64, f64, u64, u64); 5] = [
    (2 << 10, 70.0, 35_800, 8_984),
    (8 << 20, 273.0, 72_600, 23_704),
    (512 << 20, 320.0, 91_000, 31_064),
    (32 << 30, 397.0, 140_800, 42_744),
    (64 << 30, 428.0, 144_000, 43_288),
];

/// What one sector's synthetic proofs cost: `generate_synth_proofs` builds every challenge's
/// vanilla proof of the sector in memory before it writes any, and the sealer proves the
/// sectors of a batch one after another (so memory does not grow with the batch).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SynthCost {
    /// Synthetic challenges: min(nodes, 2^18).
    pub challenges: u64,
    /// Peak memory of the sector's proofs, bytes (19 GB at 8 MiB, 37 GB at 32 GiB).
    pub peak_memory_bytes: u64,
    /// Bytes of its [`SYNTH_PROOFS_FILE`] (6.2 GB at 8 MiB, 11.2 GB at 32 GiB).
    pub file_bytes: u64,
    /// CPU-seconds of its proofs (divide by the CPUs for the wall time).
    pub cpu_seconds: f64,
}

/// The synthetic proofs of one sector of `sector_size` bytes; None for a size filecoin-proofs
/// does not seal.
pub fn cost(sector_size: u64) -> Option<SynthCost> {
    let &(_, hashes, mem, file) = PER_CHALLENGE.iter().find(|c| c.0 == sector_size)?;
    let challenges = (sector_size / 32).min(SYNTH_CHALLENGES_MAX);
    let reference = PER_CHALLENGE[1].1 * SYNTH_CHALLENGES_MAX as f64;
    Some(SynthCost {
        challenges,
        peak_memory_bytes: challenges * mem,
        file_bytes: 96 + challenges * file,
        cpu_seconds: CPU_SECONDS_8MIB * challenges as f64 * hashes / reference,
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

/// Write one sector's synthetic vanilla proofs into `cache` (its layers must be there) and
/// remove its layer files. Resumable: a sector whose layers are gone and whose proofs file
/// exists is done; otherwise the file is (re)generated first, the layers removed after.
pub fn write_sector(
    cfg: &BatchConfig,
    sector: usize,
    cache: &Path,
    sealed: &Path,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
) -> anyhow::Result<()> {
    let s = &cfg.sectors[sector];
    let layers: Vec<_> = (1..=cfg.num_layers()).map(|l| cache.join(format!("sc-02-data-layer-{l}.dat"))).collect();
    let proofs = cache.join(SYNTH_PROOFS_FILE);
    if proofs.exists() && layers.iter().all(|l| !l.exists()) {
        return Ok(());
    }
    anyhow::ensure!(
        layers.iter().all(|l| l.exists()),
        "sector {}: the layer files are not in {} (synthetic proofs are made from them; run PC2 with layer files)",
        s.sector_id,
        cache.display()
    );
    let _ = std::fs::remove_file(&proofs);
    let pc = crate::porep::porep_config(cfg)?;
    let pre = filecoin_proofs::SealPreCommitOutput { comm_r, comm_d };
    let id = SectorId::from(s.sector_id);
    // A data sector's pieces: filecoin-proofs checks them against comm_d.
    let pieces = match &s.data {
        Some(d) => sealer_data::piece_infos(cfg.sector_size, &d.pieces).map_err(anyhow::Error::msg)?,
        None => vec![],
    };
    // The tree shape of the sector size, as filecoin-proofs picks it.
    with_shape!(cfg.sector_size, generate, &pc, cache, sealed, s.prover_id, id, s.ticket, pre, &pieces)
        .with_context(|| format!("sector {}: generate_synth_proofs", s.sector_id))?;
    anyhow::ensure!(proofs.exists(), "sector {}: filecoin-proofs wrote no {SYNTH_PROOFS_FILE}", s.sector_id);
    for l in &layers {
        std::fs::remove_file(l).with_context(|| format!("removing {}", l.display()))?;
    }
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

    /// The model the operator's prediction uses too (internal/predict): 8 MiB and 32 GiB.
    #[test]
    fn cost_is_the_operators_model() {
        let c = cost(8 << 20).unwrap();
        assert_eq!(c.challenges, 262_144);
        assert_eq!(c.peak_memory_bytes, 262_144 * 72_600); // ≈ 19.03e9
        assert!((c.peak_memory_bytes as f64 - 19.03e9).abs() < 0.01e9);
        assert_eq!(c.file_bytes, 96 + 262_144 * 23_704); // ≈ 6.21e9
        assert!((c.file_bytes as f64 - 6.21e9).abs() < 0.01e9);
        assert_eq!(c.cpu_seconds, 1700.0);
        let c = cost(32 << 30).unwrap();
        assert_eq!(c.challenges, 262_144);
        assert_eq!(c.peak_memory_bytes, 262_144 * 140_800); // ≈ 36.9e9
        assert_eq!(c.file_bytes, 96 + 262_144 * 42_744); // ≈ 11.2e9
        assert!((c.file_bytes as f64 - 11.2e9).abs() < 0.05e9);
        assert!((c.cpu_seconds - 1700.0 * 397.0 / 273.0).abs() < 1e-9);
        // 2 KiB: one challenge per node.
        assert_eq!(cost(2048).unwrap().challenges, 64);
        assert_eq!(cost(4096), None);
    }
}
