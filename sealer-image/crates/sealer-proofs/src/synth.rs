//! SyntheticPoRep after PC2: each sector's `syn-porep-vanilla-proofs.dat`, written by
//! filecoin-proofs' own `generate_synth_proofs` on the sealer's outputs (so it is the file
//! filecoin-proofs would write), after which the layer files are no longer needed: C1 of a
//! SyntheticPoRep sector reads the stored proofs, not the labels, and the slot can go.

use anyhow::Context;
use filecoin_proofs::{with_shape, PoRepConfig, SealPreCommitOutput};
use sealer_config::{BatchConfig, Feature};
use std::path::Path;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::sector::SectorId;

/// The file filecoin-proofs writes in a sector's cache directory.
pub const SYNTH_PROOFS_FILE: &str = "syn-porep-vanilla-proofs.dat";

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
