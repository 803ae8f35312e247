//! SnapDeals: encode deal data into sealed CC sectors (filecoin-proofs' `encode_into`), many
//! sectors at once.
//!
//! For each sector, with its sealed replica as the sector key and its cache's `p_aux`:
//! * `comm_r_old = H(comm_c, comm_r_last_old)`; `comm_d_new` is the root of tree-d over the
//!   staged data (which must be the pieces' comm_d);
//! * `phi = H_rand(comm_d_new, comm_r_old)`, and for each of the `2^h` high-bit prefixes of a
//!   node index `rho(high) = H_rand(phi, high)` (Poseidon with the "gen randomness" domain tag;
//!   `h` is 10 for production sizes, 1 up to 32 KiB);
//! * `new_replica[i] = sector_key[i] + data[i] · rho(i >> (log2(nodes) − h))` in the field;
//! * tree-r-last over the new replica (same shape as PC2's), `comm_r_new = H(comm_c, comm_r_last_new)`.
//!
//! The update's cache directory gets tree-d, tree-r-last, `p_aux` (comm_c, comm_r_last_new) and
//! the sector key's `t_aux`, as filecoin-proofs writes them.

use crate::engine::{put_levels, Engine};
use crate::{
    base_tree_count, combine_roots, data_err, field_element, fr_bytes, io, poseidon2, tmp_of, tree_name, TreeBuilder,
};
use blstrs::Scalar as Fr;
use ff::PrimeField;
use generic_array::typenum::U2;
use neptune::hash_type::{CType, HashType};
use neptune::poseidon::{Poseidon, PoseidonConstants};
use neptune::Strength;
use rayon::prelude::*;
use sealer_config::SectorSpec;
use sealer_error::SealerError;
use sealer_storage::durable;
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::OnceLock;

/// One sealed sector to update with data.
#[derive(Clone, Debug)]
pub struct SnapSector {
    /// The sector (number, and its `data`: staged file and pieces, comm_d resolved).
    pub sector: SectorSpec,
    /// The sealed CC replica (the sector key); only read.
    pub sector_key: PathBuf,
    /// The sector key's cache directory (`p_aux`, `t_aux`); only read.
    pub sector_key_cache: PathBuf,
    /// Where the updated replica is written.
    pub replica: PathBuf,
    /// The update's cache directory (created).
    pub cache: PathBuf,
    /// The sector key's comm_r the update expects (None: not checked).
    pub comm_r_old: Option<[u8; 32]>,
}

/// The commitments of one updated sector (hex, rust-fil-proofs byte order).
#[derive(Clone, Debug, Serialize)]
pub struct SnapResult {
    /// Sector number.
    pub sector_id: u64,
    /// comm_d of the new data.
    pub comm_d_new: String,
    /// comm_r of the sector key.
    pub comm_r_old: String,
    /// comm_r_last of the updated replica.
    pub comm_r_last_new: String,
    /// comm_r of the updated replica.
    pub comm_r_new: String,
}

fn gen_randomness() -> &'static PoseidonConstants<Fr, U2> {
    static C: OnceLock<PoseidonConstants<Fr, U2>> = OnceLock::new();
    C.get_or_init(|| {
        PoseidonConstants::new_with_strength_and_type(Strength::Standard, HashType::Custom(CType::Arbitrary(1)))
    })
}

fn h_rand(a: Fr, b: Fr) -> Fr {
    Poseidon::new_with_preimage(&[a, b], gen_randomness()).hash()
}

/// `h`, the number of node-index high bits that select `rho` (storage-proofs-update's default).
pub fn h_default(nodes: u64) -> u32 {
    if nodes <= 1 << 10 {
        1
    } else {
        10
    }
}

fn read32(path: &std::path::Path, what: &str) -> Result<Vec<u8>, SealerError> {
    std::fs::read(path).map_err(|e| io(&format!("reading {what} {}", path.display()), e))
}

fn fr_of(b: &[u8], what: &str) -> Result<Fr, SealerError> {
    let mut r = [0u8; 32];
    r.copy_from_slice(&b[..32]);
    Option::from(Fr::from_repr(r)).ok_or_else(|| SealerError::Input(format!("{what} is not a field element")))
}

/// What every updated sector must pass before its outputs are renamed into place: its new
/// replica and tree-r-last (under `.tmp` names, `p_aux.tmp` with comm_c and comm_r_last_new)
/// against its new commitments. An error is the sector's failure (class `audit`).
pub trait UpdateAudit: Sync {
    /// Ok, or why the outputs are not what their commitments say.
    fn audit(&self, sector_size: u64, sector_id: u64, out: &crate::SealedOutputs) -> Result<(), String>;
}

/// Encode every sector's data into its sector key, all sectors in parallel; the first failure
/// in sector order is returned. Files are written under `.tmp` names and renamed when complete
/// (`p_aux` last), after `audit` passed (the sealer's production path always gives one).
/// tree-r-last is built by `engine` (the encoding itself is one multiply-add a node, on the CPU).
pub fn encode_sectors(
    sector_size: u64,
    sectors: &[SnapSector],
    engine: &Engine,
    audit: Option<&dyn UpdateAudit>,
) -> Result<Vec<SnapResult>, SealerError> {
    encode_each(sector_size, sectors, engine, audit).into_iter().collect()
}

/// [`encode_sectors`], each sector's outcome apart: a sector that fails costs only itself.
pub fn encode_each(
    sector_size: u64,
    sectors: &[SnapSector],
    engine: &Engine,
    audit: Option<&dyn UpdateAudit>,
) -> Vec<Result<SnapResult, SealerError>> {
    sectors.par_iter().map(|s| encode_sector(sector_size, s, engine, audit)).collect()
}

/// [`encode_sectors`] for one sector.
pub fn encode_sector(
    sector_size: u64,
    s: &SnapSector,
    engine: &Engine,
    audit: Option<&dyn UpdateAudit>,
) -> Result<SnapResult, SealerError> {
    let id = s.sector.sector_id;
    let nodes = sector_size / 32;
    let key = File::open(&s.sector_key)
        .map_err(|e| io(&format!("sector {id}: opening its sector key {}", s.sector_key.display()), e))?;
    let key_len = key.metadata().map_err(|e| io("sector key", e))?.len();
    if key_len != sector_size {
        return Err(SealerError::Input(format!(
            "sector {id}: its sector key {} is {key_len} bytes, not a sealed {sector_size}-byte replica",
            s.sector_key.display()
        )));
    }
    let p_aux = read32(&s.sector_key_cache.join("p_aux"), "p_aux")?;
    if p_aux.len() != 64 {
        return Err(SealerError::Input(format!(
            "sector {id}: {} is not a p_aux (64 bytes)",
            s.sector_key_cache.join("p_aux").display()
        )));
    }
    let t_aux = read32(&s.sector_key_cache.join("t_aux"), "t_aux")?;
    let rtd = crate::t_aux_rows_to_discard(&t_aux)
        .map_err(|e| SealerError::Input(format!("sector {id}: t_aux of {}: {e}", s.sector_key_cache.display())))?;
    let comm_c = fr_of(&p_aux[..32], "p_aux comm_c")?;
    let comm_r_old = poseidon2(comm_c, fr_of(&p_aux[32..], "p_aux comm_r_last")?);
    if let Some(want) = s.comm_r_old.filter(|w| *w != fr_bytes(&comm_r_old)) {
        return Err(SealerError::DataMismatch(format!(
            "sector {id}: its sector key's p_aux ({}) makes comm_r {} but the update expects {}: the sector key is not that sector's; point spec.update.sectorKeys at where sector {id} was sealed",
            s.sector_key_cache.join("p_aux").display(),
            hex::encode(fr_bytes(&comm_r_old)),
            hex::encode(want)
        )));
    }

    std::fs::create_dir_all(&s.cache).map_err(|e| io(&format!("creating {}", s.cache.display()), e))?;
    let _ = std::fs::remove_file(s.cache.join("p_aux"));
    // tree-d over the new data: its root is comm_d_new, which must be the pieces'.
    let root = sealer_data::write_tree_d(&s.sector, sector_size, &s.cache.join("sc-02-data-tree-d.dat.tmp"))
        .map_err(data_err)?;
    let want = s.sector.comm_d.expect("comm_d resolved from the pieces");
    if root != want {
        return Err(SealerError::DataMismatch(format!(
            "sector {id}: its data has comm_d {} (tree-d root) but its pieces make {}: the file does not hold those pieces",
            hex::encode(root),
            hex::encode(want)
        )));
    }
    let comm_d_new = fr_of(&root, "comm_d")?;
    let phi = h_rand(comm_d_new, comm_r_old);
    let h = h_default(nodes);
    let shr = nodes.trailing_zeros() - h;
    let rhos: Vec<Fr> = (0..1u64 << h).map(|high| h_rand(phi, Fr::from(high))).collect();

    let data = sealer_data::DataFile::open(&s.sector, sector_size).map_err(data_err)?;
    let out = File::create(tmp_of(&s.replica)).map_err(|e| io("creating the updated replica", e))?;
    out.set_len(sector_size).map_err(|e| io("sizing the updated replica", e))?;
    let t = base_tree_count(sector_size);
    let leaves = nodes / t as u64;
    let range = leaves.min(1 << 15);
    let (mut kb, mut db) = (vec![0u8; range as usize * 32], vec![0u8; range as usize * 32]);
    let mut roots = Vec::with_capacity(t);
    for k in 0..t {
        let name = format!("{}.tmp", tree_name("tree-r-last", k, t));
        let mut tr =
            TreeBuilder::new(&s.cache.join(name), leaves, rtd + 1).map_err(|e| io("creating tree-r-last", e))?;
        let mut v = k as u64 * leaves;
        while v < (k as u64 + 1) * leaves {
            key.read_exact_at(&mut kb, v * 32).map_err(|e| io("reading the sector key", e))?;
            data.read_nodes(v, &mut db).map_err(|e| io("reading the data", e))?;
            for i in 0..range as usize {
                let node = v + i as u64;
                let kf = field_element(&kb[i * 32..i * 32 + 32], node).map_err(|e| io("sector key", e))?;
                let df = field_element(&db[i * 32..i * 32 + 32], node).map_err(|e| io("data", e))?;
                let new = kf + df * rhos[(node >> shr) as usize];
                kb[i * 32..i * 32 + 32].copy_from_slice(&fr_bytes(&new));
                if let Engine::Cpu = engine {
                    tr.push(0, new).map_err(|e| io("writing tree-r-last", e))?;
                }
            }
            if let Engine::Gpu(gpus) = engine {
                let (levels, _) = gpus[0].tree8(&kb, 1).map_err(crate::engine::device_err)?;
                put_levels(&mut tr, |j| Some(levels[j].as_slice()), levels.len(), range as usize, 0)
                    .map_err(|e| io("writing tree-r-last", e))?;
            }
            out.write_all_at(&kb, v * 32).map_err(|e| io("writing the updated replica", e))?;
            v += range;
        }
        roots.push(tr.finish().map_err(|e| io("finishing tree-r-last", e))?);
    }
    out.sync_all().map_err(|e| io("syncing the updated replica", e))?;
    let comm_r_last_new = combine_roots(&roots);
    let comm_r_new = poseidon2(comm_c, comm_r_last_new);

    // t_aux is the sector key's (filecoin-proofs persists it unchanged); p_aux last.
    durable::write_synced(&s.cache.join("t_aux.tmp"), &t_aux).map_err(|e| io("writing t_aux", e))?;
    let mut paux = fr_bytes(&comm_c).to_vec();
    paux.extend_from_slice(&fr_bytes(&comm_r_last_new));
    durable::write_synced(&s.cache.join("p_aux.tmp"), &paux).map_err(|e| io("writing p_aux", e))?;
    if let Some(audit) = audit {
        let out = crate::SealedOutputs {
            index: 0,
            replica: tmp_of(&s.replica),
            cache: s.cache.clone(),
            comm_c: fr_bytes(&comm_c),
            comm_r_last: fr_bytes(&comm_r_last_new),
            comm_r: fr_bytes(&comm_r_new),
        };
        audit.audit(sector_size, id, &out).map_err(|why| SealerError::VerifyMismatch(format!("sector {id}: {why}")))?;
    }
    crate::rename_tmp(&s.cache).map_err(|e| io("renaming outputs", e))?;
    durable::rename(&tmp_of(&s.replica), &s.replica).map_err(|e| io("renaming the updated replica", e))?;
    durable::rename(&s.cache.join("p_aux.tmp"), &s.cache.join("p_aux")).map_err(|e| io("renaming p_aux", e))?;
    Ok(SnapResult {
        sector_id: id,
        comm_d_new: hex::encode(root),
        comm_r_old: hex::encode(fr_bytes(&comm_r_old)),
        comm_r_last_new: hex::encode(fr_bytes(&comm_r_last_new)),
        comm_r_new: hex::encode(fr_bytes(&comm_r_new)),
    })
}
