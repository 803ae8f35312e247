//! NI-PoRep after PC2: C1 needs no interactive seed (its challenges come from comm_r), so each
//! sector's C1 output is made right after PC2, with filecoin-proofs-api's `seal_commit_phase1`
//! on the sealer's outputs, and written as `commit-phase1-output` in the sector's cache
//! directory: the serde JSON of `SealCommitPhase1Output`, the bytes filecoin-ffi returns from
//! C1 and lotus and Curio hand to C2. Its vanilla proofs are checked by filecoin-proofs while
//! it is made. Then the layer files are no longer needed and are removed.

use anyhow::Context;
use filecoin_proofs_api::seal::{seal_commit_phase1, SealPreCommitPhase2Output};
use filecoin_proofs_api::{RegisteredSealProof, SectorId};
use sealer_config::{BatchConfig, Feature};
use std::path::Path;

/// The C1 output file in a sector's cache directory.
pub const C1_OUTPUT_FILE: &str = "commit-phase1-output";

/// True when the config seals NI-PoRep sectors.
pub fn enabled(cfg: &BatchConfig) -> bool {
    cfg.features.contains(&Feature::NonInteractivePoRep)
}

/// filecoin-proofs-api's name for the config's proof.
pub fn registered_proof(cfg: &BatchConfig) -> anyhow::Result<RegisteredSealProof> {
    let name = cfg.proof_name();
    serde_json::from_value(serde_json::Value::String(name.clone()))
        .with_context(|| format!("{name} is not a filecoin-proofs-api RegisteredSealProof"))
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
    let layers: Vec<_> = (1..=cfg.num_layers()).map(|l| cache.join(format!("sc-02-data-layer-{l}.dat"))).collect();
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
    let pieces = match &s.data {
        Some(d) => sealer_data::piece_infos(cfg.sector_size, &d.pieces).map_err(anyhow::Error::msg)?,
        None => vec![],
    };
    let pre = SealPreCommitPhase2Output { registered_proof: registered_proof(cfg)?, comm_r, comm_d };
    // NI-PoRep ignores the seed; filecoin-ffi callers pass zeros.
    let c1 =
        seal_commit_phase1(cache, sealed, s.prover_id, SectorId::from(s.sector_id), s.ticket, [0; 32], pre, &pieces)
            .with_context(|| format!("sector {}: seal_commit_phase1", s.sector_id))?;
    let tmp = cache.join(format!("{C1_OUTPUT_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(&c1)?).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &out).with_context(|| format!("renaming {}", tmp.display()))?;
    for l in &layers {
        std::fs::remove_file(l).with_context(|| format!("removing {}", l.display()))?;
    }
    Ok(())
}
