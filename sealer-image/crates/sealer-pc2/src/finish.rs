//! PC2's finish, after every base tree is hashed: tree-d and the commitments (`t_aux` and
//! `p_aux` written and synced under `.tmp` names), the audit every sector answers, the layer
//! export, the checkpoint's removal, the renames (`p_aux` last), the given-up sectors' files
//! deleted, and `results.json`. Nothing of a sector is renamed into place before its files are
//! synced and its audit passed.

use crate::losses::Losses;
use crate::writer::OutputFile;
use crate::{
    checkpoint, combine_roots, export_into_caches, fr_bytes, io, poseidon2, rename_tmp, t_aux_bytes, tmp_of, unhex32,
    Pc2Breakdown, SealedOutputs, SectorAudit, SectorResult,
};
use blstrs::Scalar as Fr;
use rayon::prelude::*;
use sealer_config::{sector_paths, BatchConfig};
use sealer_data::SectorFailure;
use sealer_error::SealerError;
use sealer_storage::durable;
use std::path::PathBuf;
use std::time::Instant;

/// What the hashing leaves, per sector of the batch.
pub(crate) struct Hashed {
    /// Cache directories.
    pub caches: Vec<PathBuf>,
    /// Replica files (None: given up).
    pub replicas: Vec<Option<OutputFile>>,
    /// Whether the sector's replica and cache are this batch's to delete when it is given up.
    pub ours: Vec<bool>,
    /// The base trees' roots: tree-c, tree-r-last.
    pub roots_c: Vec<Vec<Fr>>,
    /// See `roots_c`.
    pub roots_r: Vec<Vec<Fr>>,
    /// Replica ids and the comm_ds the sectors were labelled under.
    pub rids: Vec<[u8; 32]>,
    /// See `rids`.
    pub cds: Vec<[u8; 32]>,
    /// Nodes of a sector.
    pub nodes: u64,
}

/// The error that fails the batch when no sector is left.
fn lost_all(losses: &Losses) -> Result<(), SealerError> {
    losses.all_lost().map_or(Ok(()), Err)
}

/// The finish (see the module's comment): the sealed sectors' results and every sector given
/// up on the way.
pub(crate) fn finish(
    cfg: &BatchConfig,
    h: Hashed,
    losses: &mut Losses,
    export_layers: bool,
    audit: Option<&dyn SectorAudit>,
    bd: &mut Pc2Breakdown,
) -> Result<(Vec<SectorResult>, Vec<SectorFailure>), SealerError> {
    let mut results = commitments(cfg, &h, losses, bd)?;
    if let Some(audit) = audit {
        let t = Instant::now();
        audit_all(cfg, &h, &results, losses, audit);
        bd.audit = t.elapsed().as_secs_f64();
        lost_all(losses)?;
    }
    // The export keeps the checkpoint: a failure there (ENOSPC) resumes after every tree.
    if export_layers {
        export_into_caches(cfg, &h.caches, |s| losses.is_lost(s))?;
    }
    // Every output is written and synced under its .tmp name; from the first rename on, a
    // restart starts PC2 again.
    checkpoint::remove(&cfg.output_dir)?;
    hand_over(cfg, &h, losses)?;
    // A sector given up leaves nothing behind: its outputs would pass for a sealed sector's.
    let failed = losses.failures();
    results.retain(|r| !failed.iter().any(|f| f.sector_id == r.sector_id));
    for (s, sec) in cfg.sectors.iter().enumerate() {
        // Only the batch's own: a path PC2 could not open is not its to delete.
        if losses.is_lost(s) && h.ours[s] {
            let _ = std::fs::remove_file(tmp_of(&sector_paths(cfg, sec.sector_id).sealed));
            let _ = std::fs::remove_dir_all(&h.caches[s]);
        }
    }
    let summary = serde_json::json!({ "sectors": results });
    durable::replace(&cfg.output_dir.join("results.json"), serde_json::to_string_pretty(&summary).unwrap().as_bytes())
        .map_err(|e| io("writing results.json", e))?;
    Ok((results, failed))
}

/// tree-d from the data (the CC tree for CC sectors), all sectors at once, whose root must be
/// the comm_d the replica id was made with (or the data changed under the batch); then each
/// sector's commitments, its replica synced, `t_aux` and `p_aux` written and synced.
fn commitments(
    cfg: &BatchConfig,
    h: &Hashed,
    losses: &mut Losses,
    bd: &mut Pc2Breakdown,
) -> Result<Vec<SectorResult>, SealerError> {
    let t_d = Instant::now();
    let mut tree_d_roots: Vec<Option<Result<[u8; 32], sealer_data::DataError>>> = cfg
        .sectors
        .par_iter()
        .zip(h.caches.par_iter())
        .enumerate()
        .map(|(s, (sec, cache))| {
            (!losses.is_lost(s))
                .then(|| sealer_data::write_tree_d(sec, cfg.sector_size, &cache.join("sc-02-data-tree-d.dat.tmp")))
        })
        .collect();
    bd.tree_d = t_d.elapsed().as_secs_f64();
    let mut results = Vec::new();
    for (s, sec) in cfg.sectors.iter().enumerate() {
        let root = match tree_d_roots[s].take() {
            None => continue,
            Some(Ok(root)) => root,
            Some(Err(e)) => {
                let f = SectorFailure::of(sec.sector_id, e);
                losses.give_up(s, f.class, f.reason);
                continue;
            }
        };
        if root != h.cds[s] {
            let why = format!(
                "its data now has comm_d {} but it was labelled under {}: the staged file changed during the batch; stage it again and seal it in another batch",
                hex::encode(root),
                hex::encode(h.cds[s])
            );
            losses.give_up(s, "data-mismatch", why);
            continue;
        }
        let comm_c = combine_roots(&h.roots_c[s]);
        let comm_r_last = combine_roots(&h.roots_r[s]);
        let comm_r = poseidon2(comm_c, comm_r_last);
        let cache = &h.caches[s];
        let aux = (|| {
            h.replicas[s].as_ref().expect("a sector not given up has its replica").sync_all()?;
            let abs = std::fs::canonicalize(cache)?;
            let layers = cfg.num_layers();
            durable::write_synced(&cache.join("t_aux.tmp"), &t_aux_bytes(&abs, h.nodes, layers, cfg.sector_size))?;
            let mut paux = Vec::with_capacity(64);
            paux.extend_from_slice(&fr_bytes(&comm_c));
            paux.extend_from_slice(&fr_bytes(&comm_r_last));
            durable::write_synced(&cache.join("p_aux.tmp"), &paux)
        })();
        if let Err(e) = aux {
            losses.io(s, &format!("writing its t_aux and p_aux in {}", cache.display()), e);
            continue;
        }
        results.push(SectorResult {
            sector_id: sec.sector_id,
            replica_id: hex::encode(h.rids[s]),
            comm_d: hex::encode(h.cds[s]),
            comm_c: hex::encode(fr_bytes(&comm_c)),
            comm_r_last: hex::encode(fr_bytes(&comm_r_last)),
            comm_r: hex::encode(fr_bytes(&comm_r)),
        });
    }
    lost_all(losses)?;
    Ok(results)
}

/// Every sealed sector's audit: a sector that fails is given up with the audit's class.
fn audit_all(cfg: &BatchConfig, h: &Hashed, results: &[SectorResult], losses: &mut Losses, audit: &dyn SectorAudit) {
    let written: Vec<SealedOutputs> = results
        .iter()
        .filter_map(|r| {
            let s = cfg.sectors.iter().position(|x| x.sector_id == r.sector_id)?;
            Some(SealedOutputs {
                index: s,
                replica: tmp_of(&sector_paths(cfg, r.sector_id).sealed),
                cache: h.caches[s].clone(),
                comm_c: unhex32(&r.comm_c),
                comm_r_last: unhex32(&r.comm_r_last),
                comm_r: unhex32(&r.comm_r),
            })
        })
        .collect();
    for (o, verdict) in written.iter().zip(audit.audit(cfg, &written)) {
        if let Err(f) = verdict {
            losses.give_up(o.index, f.class, f.reason);
        }
    }
}

/// Each sealed sector's outputs under their final names, the replica and the cache's files
/// first, `p_aux` last, every directory synced.
fn hand_over(cfg: &BatchConfig, h: &Hashed, losses: &mut Losses) -> Result<(), SealerError> {
    for (s, sec) in cfg.sectors.iter().enumerate() {
        if losses.is_lost(s) {
            continue;
        }
        let cache = &h.caches[s];
        let sealed = sector_paths(cfg, sec.sector_id).sealed;
        let renamed = rename_tmp(cache).and_then(|()| durable::rename(&tmp_of(&sealed), &sealed));
        if let Err(e) = renamed.and_then(|()| {
            // The replica is in place: a failure from here leaves it this run's to delete.
            // p_aux last: a cache directory with p_aux is complete, and durable.
            durable::rename(&cache.join("p_aux.tmp"), &cache.join("p_aux")).inspect_err(|_| {
                let _ = std::fs::remove_file(&sealed);
            })
        }) {
            losses.io(s, "renaming its outputs", e);
        }
    }
    lost_all(losses)
}
