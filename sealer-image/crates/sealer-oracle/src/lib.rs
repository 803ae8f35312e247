//! rust-fil-proofs as an oracle and as the benchmark baseline: one sector (CC, or a data
//! sector from its staged file and pieces) through crates.io `filecoin-proofs`.

use anyhow::Context;
use filecoin_proofs::{seal_pre_commit_phase1, PoRepConfig, SealPreCommitPhase1Output, SectorShapeBase};
use rayon::prelude::*;
use sealer_config::{BatchConfig, SectorSpec, SnapConfig};
use sealer_proofs::porep::{porep_config, proof_config};
use std::path::Path;
use storage_proofs_core::sector::SectorId;

/// Point the filecoin crates' caches at `dir` unless already set. Must run before their
/// settings are first read (they are read once per process).
pub fn set_cache_env(dir: &Path) {
    for (k, sub) in [
        ("FIL_PROOFS_PARENT_CACHE", "parents"),
        ("FIL_PROOFS_PARAMETER_CACHE", "params"),
        ("FIL_PROOFS_CACHE_DIR", "cache"),
    ] {
        if std::env::var_os(k).is_none() {
            let p = dir.join(sub);
            let _ = std::fs::create_dir_all(&p);
            std::env::set_var(k, &p);
        }
    }
}

/// Output of one oracle run.
pub struct OracleSector {
    /// Labels of every layer (N·32 bytes each).
    pub layers: Vec<Vec<u8>>,
    /// comm_d reported by filecoin-proofs.
    pub comm_d: [u8; 32],
}

/// Seal one sector's PC1 with filecoin-proofs in `work` and read back its layer files.
/// Only the sizes whose shape is `SectorShapeBase` (2 KiB, 8 MiB, 512 MiB) are supported.
pub fn pc1_sector(cfg: &BatchConfig, s: &SectorSpec, work: &Path, read_layers: bool) -> anyhow::Result<OracleSector> {
    let cache = work.join(format!("cache-{}", s.sector_id));
    let sealed = work.join(format!("sealed-{}", s.sector_id));
    let (_, out) = phase1(cfg, s, &cache, &sealed)?;
    let layers = if read_layers {
        (1..=filecoin_proofs_layers(cfg.sector_size))
            .map(|l| std::fs::read(cache.join(format!("sc-02-data-layer-{l}.dat"))))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        vec![]
    };
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_file(&sealed);
    Ok(OracleSector { layers, comm_d: out.comm_d })
}

/// The filecoin-proofs input of a sector: its staged file (or /dev/zero for CC) and pieces.
fn sector_input(
    cfg: &BatchConfig,
    s: &SectorSpec,
) -> anyhow::Result<(std::path::PathBuf, Vec<filecoin_proofs::PieceInfo>)> {
    match &s.data {
        None => Ok(("/dev/zero".into(), vec![])),
        Some(d) => Ok((
            d.path.clone(),
            sealer_data::piece_infos(cfg.sector_size, &d.pieces).map_err(anyhow::Error::msg).context("pieces")?,
        )),
    }
}

/// filecoin-proofs seal_pre_commit_phase1 for one sector into `cache` and `sealed` (both
/// created here), with the PoRepConfig it used.
fn phase1(
    cfg: &BatchConfig,
    s: &SectorSpec,
    cache: &Path,
    sealed: &Path,
) -> anyhow::Result<(PoRepConfig, SealPreCommitPhase1Output<SectorShapeBase>)> {
    let pc = porep_config(cfg)?;
    std::fs::create_dir_all(cache)?;
    std::fs::File::create(sealed)?;
    let (input, pieces) = sector_input(cfg, s)?;
    let out = seal_pre_commit_phase1::<_, _, _, SectorShapeBase>(
        &pc,
        cache,
        input,
        sealed,
        s.prover_id,
        SectorId::from(s.sector_id),
        s.ticket,
        &pieces,
    )
    .context("seal_pre_commit_phase1")?;
    Ok((pc, out))
}

/// Layer count filecoin-proofs uses for a size.
pub fn filecoin_proofs_layers(sector_size: u64) -> usize {
    *filecoin_proofs::constants::LAYERS.read().unwrap().get(&sector_size).expect("known size")
}

/// Output of a full filecoin-proofs PC1 + PC2 on one sector (files kept in `work`).
pub struct OraclePreCommit {
    /// comm_r.
    pub comm_r: [u8; 32],
    /// comm_d.
    pub comm_d: [u8; 32],
    /// The cache directory (tree files, p_aux, t_aux).
    pub cache: std::path::PathBuf,
    /// The replica file.
    pub sealed: std::path::PathBuf,
    /// Wall seconds of seal_pre_commit_phase1.
    pub pc1_seconds: f64,
    /// Wall seconds of seal_pre_commit_phase2.
    pub pc2_seconds: f64,
}

/// filecoin-proofs seal_pre_commit_phase1 + phase2 for one sector; keeps its files.
pub fn precommit_sector(cfg: &BatchConfig, s: &SectorSpec, work: &Path) -> anyhow::Result<OraclePreCommit> {
    let cache = work.join(format!("oracle-cache-{}", s.sector_id));
    let sealed = work.join(format!("oracle-sealed-{}", s.sector_id));
    let t0 = std::time::Instant::now();
    let (pc, p1) = phase1(cfg, s, &cache, &sealed)?;
    let pc1_seconds = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let out = filecoin_proofs::seal_pre_commit_phase2(&pc, p1, &cache, &sealed).context("seal_pre_commit_phase2")?;
    let pc2_seconds = t1.elapsed().as_secs_f64();
    Ok(OraclePreCommit { comm_r: out.comm_r, comm_d: out.comm_d, cache, sealed, pc1_seconds, pc2_seconds })
}

/// filecoin-proofs seal_commit_phase1 (C1) on a cache dir and replica; its built-in sanity
/// check verifies every vanilla proof with storage-proofs-porep's verifier. Returns the
/// number of partitions' vanilla proofs produced.
pub fn commit_phase1(
    cfg: &BatchConfig,
    s: &SectorSpec,
    cache: &Path,
    sealed: &Path,
    seed: [u8; 32],
    comm_r: [u8; 32],
    comm_d: [u8; 32],
) -> anyhow::Result<usize> {
    let pc = porep_config(cfg)?;
    let out = filecoin_proofs::seal_commit_phase1::<_, SectorShapeBase>(
        &pc,
        cache,
        sealed,
        s.prover_id,
        SectorId::from(s.sector_id),
        s.ticket,
        seed,
        filecoin_proofs::SealPreCommitOutput { comm_r, comm_d },
        &sector_input(cfg, s)?.1,
    )
    .context("seal_commit_phase1")?;
    Ok(out.vanilla_proofs.len())
}

/// filecoin-proofs PC1 + PC2 for every sector of a batch config (CC and data sectors,
/// base-shape test sizes), as `{"sectors": [{"sector_id", "comm_d", "comm_r"}]}` with hex commitments in the
/// byte order rust-fil-proofs returns them, like `results.json`. Sectors seal side by side on
/// rayon's threads (filecoin-proofs labels one sector on one thread; its parent cache is built
/// once, under its own lock). Each sector's files are removed once it is sealed; the parent
/// cache under `work` is kept for the next run.
pub fn precommit_batch(cfg: &BatchConfig, work: &Path) -> anyhow::Result<serde_json::Value> {
    if cfg.sector_size > 512 << 20 {
        anyhow::bail!(
            "sector size {} is not a test size: the oracle seals 2KiB, 8MiB and 512MiB sectors",
            cfg.sector_size
        );
    }
    set_cache_env(&work.join("fil-proofs"));
    let out = cfg
        .sectors
        .par_iter()
        .map(|s| {
            let dir = work.join(format!("sector-{}", s.sector_id));
            std::fs::create_dir_all(&dir)?;
            let r = precommit_sector(cfg, s, &dir)?;
            let _ = std::fs::remove_dir_all(&dir);
            Ok(serde_json::json!({
                "sector_id": s.sector_id,
                "comm_d": hex::encode(r.comm_d),
                "comm_r": hex::encode(r.comm_r),
            }))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(serde_json::json!({ "sectors": out }))
}

/// filecoin-proofs `encode_into` (SnapDeals) of a data sector's staged file into a sealed
/// sector key; the new replica and cache dir are created here. Returns (comm_r_new,
/// comm_r_last_new, comm_d_new).
pub fn snap_encode(
    cfg: &BatchConfig,
    s: &SectorSpec,
    sector_key: &Path,
    sector_key_cache: &Path,
    replica: &Path,
    cache: &Path,
) -> anyhow::Result<([u8; 32], [u8; 32], [u8; 32])> {
    let (data, pieces) = sector_input(cfg, s)?;
    encode_into(&porep_config(cfg)?, &data, &pieces, sector_key, sector_key_cache, replica, cache)
}

/// filecoin-proofs `encode_into` of a staged file holding `pieces` into a sector key.
fn encode_into(
    pc: &PoRepConfig,
    data: &Path,
    pieces: &[filecoin_proofs::PieceInfo],
    sector_key: &Path,
    sector_key_cache: &Path,
    replica: &Path,
    cache: &Path,
) -> anyhow::Result<([u8; 32], [u8; 32], [u8; 32])> {
    std::fs::create_dir_all(cache)?;
    std::fs::File::create(replica)?.set_len(u64::from(pc.sector_size))?;
    let out = filecoin_proofs::encode_into::<SectorShapeBase>(
        &filecoin_proofs::SectorUpdateConfig::from_porep_config(pc),
        replica,
        cache,
        sector_key,
        sector_key_cache,
        data,
        pieces,
    )
    .context("encode_into")?;
    Ok((out.comm_r_new, out.comm_r_last_new, out.comm_d_new))
}

/// filecoin-proofs `encode_into` for every sector of an update config, one at a time, into
/// `work` (its files removed after each); the results in `sealer snap`'s format, without
/// comm_r_old (the sealed sector's comm_r, which its own seal reported).
pub fn snap_update(cfg: &SnapConfig, work: &Path) -> anyhow::Result<serde_json::Value> {
    let pc = proof_config(&cfg.proof)?;
    let mut out = Vec::with_capacity(cfg.sectors.len());
    for s in &cfg.sectors {
        let pieces = sealer_data::piece_infos(cfg.proof.sector_size, &s.data.pieces)
            .map_err(anyhow::Error::msg)
            .context("pieces")?;
        let dir = work.join(format!("oracle-update-{}", s.sector_id));
        let _ = std::fs::remove_dir_all(&dir);
        let (cr, crl, cd) = encode_into(
            &pc,
            &s.data.path,
            &pieces,
            &s.sector_key,
            &s.sector_key_cache,
            &dir.join("sealed"),
            &dir.join("cache"),
        )
        .with_context(|| format!("sector {}", s.sector_id))?;
        out.push(serde_json::json!({
            "sector_id": s.sector_id,
            "comm_d_new": hex::encode(cd),
            "comm_r_last_new": hex::encode(crl),
            "comm_r_new": hex::encode(cr),
        }));
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(serde_json::json!({ "sectors": out }))
}

/// filecoin-proofs' vanilla SnapDeals proofs of every partition, generated from an update's
/// files and verified by its verifier.
pub fn snap_prove_and_verify(
    cfg: &BatchConfig,
    comms: ([u8; 32], [u8; 32], [u8; 32]),
    sector_key: &Path,
    sector_key_cache: &Path,
    replica: &Path,
    cache: &Path,
) -> anyhow::Result<bool> {
    let (comm_r_old, comm_r_new, comm_d_new) = comms;
    let uc = filecoin_proofs::SectorUpdateConfig::from_porep_config(&porep_config(cfg)?);
    let proofs = filecoin_proofs::generate_partition_proofs::<SectorShapeBase>(
        uc,
        comm_r_old,
        comm_r_new,
        comm_d_new,
        sector_key,
        sector_key_cache,
        replica,
        cache,
    )
    .context("generate_partition_proofs")?;
    filecoin_proofs::verify_partition_proofs::<SectorShapeBase>(uc, &proofs, comm_r_old, comm_r_new, comm_d_new)
        .context("verify_partition_proofs")
}
