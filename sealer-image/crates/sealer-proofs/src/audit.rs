//! The audit every sealed sector passes before its outputs leave PC2 (or a SnapDeals update):
//! exit 0 must mean the bytes on disk are the ones the commitments describe.
//!
//! Two checks, both at points drawn afresh for every run:
//! * **WindowPoSt vanilla proofs**, with filecoin-proofs' own functions, as
//!   `lotus-miner proving check --slow` makes them: challenges from
//!   `generate_fallback_sector_challenges`, proofs from `generate_single_vanilla_proof` over the
//!   replica and tree-r-last, and every Merkle path verified against comm_r_last and comm_r
//!   by storage-proofs-post's verifier. This is what the chain will ask of the sector.
//! * **Spot checks** at random nodes, the part of the sector PoSt never reads: each layer's
//!   label recomputed from its parents (computed here from the graph, not from the parent
//!   cache), the replica node against the last layer's label plus the data, the tree-c leaf
//!   against the column hash, and tree-c's path from that leaf to comm_c.
//!
//! A sector that fails is given up with class `audit`; its files are deleted, never handed off.

use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_hashers::Domain;
use filecoin_proofs::{
    generate_fallback_sector_challenges, generate_single_vanilla_proof, with_shape, PoStConfig, PoStType,
    PrivateReplicaInfo, SectorSize,
};
use sealer_config::BatchConfig;
use sealer_data::SectorFailure;
use sealer_pc2::snap::UpdateAudit;
use sealer_pc2::{base_tree_count, combine_roots, fr_bytes, poseidon11, poseidon2, poseidon8, rows_to_discard};
use sealer_pc2::{tree_name, SealedOutputs, SectorAudit};
use sealer_storage::AlignedBuf;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_core::sector::SectorId;
use storage_proofs_post::fallback;

/// WindowPoSt challenges proved and verified per sector (the chain asks 10 per sector).
pub const CHALLENGES: usize = 32;

/// Nodes spot-checked per batch (every sector, every layer at each).
pub const SPOT_NODES: usize = 8;

/// Test hook: flip one byte of the first sector's `replica`, `tree-r-last` or `tree-c` at the
/// first point the audit checks, as a disk or a bug would, right before the audit reads it.
pub const SPOIL_ENV: &str = "SEALER_TEST_AUDIT_SPOIL";

/// Test hook: the audit's seed (a number), so a test knows the points it checks.
pub const SEED_ENV: &str = "SEALER_TEST_AUDIT_SEED";

/// The audit of the sealer's production path.
pub struct Audit {
    seed: [u8; 32],
    spoil: Option<String>,
}

impl Audit {
    /// An audit at points drawn for this run (or from [`SEED_ENV`]).
    pub fn new() -> Self {
        let seed = match std::env::var(SEED_ENV).ok().and_then(|s| s.parse::<u64>().ok()) {
            Some(n) => seed_of(n),
            None => {
                use std::hash::{BuildHasher, Hasher};
                let mut b = Vec::new();
                for i in 0..4u64 {
                    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                    h.write_u64(i);
                    b.extend_from_slice(&h.finish().to_le_bytes());
                }
                sealer_hash::sha256(&b)
            }
        };
        Audit { seed, spoil: std::env::var(SPOIL_ENV).ok() }
    }
}

impl Default for Audit {
    fn default() -> Self {
        Self::new()
    }
}

/// The audit seed of test seed `n`.
pub fn seed_of(n: u64) -> [u8; 32] {
    let mut b = b"sealfleet-audit".to_vec();
    b.extend_from_slice(&n.to_le_bytes());
    sealer_hash::sha256(&b)
}

/// The nodes the spot checks of seed `seed` visit in a sector of `nodes` nodes.
pub fn spot_nodes(seed: &[u8; 32], nodes: u64) -> Vec<u64> {
    (0..SPOT_NODES as u64)
        .map(|i| {
            let mut b = seed.to_vec();
            b.extend_from_slice(b"spot");
            b.extend_from_slice(&i.to_le_bytes());
            let h = sealer_hash::sha256(&b);
            u64::from_le_bytes(h[..8].try_into().unwrap()) % nodes
        })
        .collect()
}

/// The PoSt randomness of `seed` for `sector_id`: 32 bytes that are a field element.
fn randomness(seed: &[u8; 32], sector_id: u64) -> [u8; 32] {
    let mut b = seed.to_vec();
    b.extend_from_slice(b"post");
    b.extend_from_slice(&sector_id.to_le_bytes());
    let mut r = sealer_hash::sha256(&b);
    r[31] &= 0x3f;
    r
}

impl SectorAudit for Audit {
    fn audit(&self, cfg: &BatchConfig, outputs: &[SealedOutputs]) -> Vec<Result<(), SectorFailure>> {
        let spots = spot_nodes(&self.seed, cfg.nodes());
        if let Some(what) = &self.spoil {
            if let Some(o) = outputs.first() {
                spoil(cfg, o, what, &self.seed, spots[0]);
            }
        }
        let spot = spot_check(cfg, outputs, &spots);
        outputs
            .iter()
            .zip(spot)
            .map(|(o, spot)| {
                let id = cfg.sectors[o.index].sector_id;
                spot.and_then(|()| post_check(cfg.sector_size, id, o, &self.seed)).map_err(|why| {
                    SectorFailure::new(
                        id,
                        "audit",
                        format!(
                            "its outputs failed the audit before handoff: {why}; its files were deleted, seal it again"
                        ),
                    )
                })
            })
            .collect()
    }
}

impl UpdateAudit for Audit {
    fn audit(&self, sector_size: u64, sector_id: u64, out: &SealedOutputs) -> Result<(), String> {
        if self.spoil.as_deref() == Some("replica") {
            let c = first_challenge(sector_size, sector_id, &self.seed);
            flip(&out.replica, c * 32);
        }
        post_check(sector_size, sector_id, out, &self.seed)
            .map_err(|why| format!("the updated sector's outputs failed the audit before handoff: {why}"))
    }
}

/// The PoSt parameters of the audit: its own challenge count, one sector, the current API.
fn post_config(sector_size: u64) -> PoStConfig {
    PoStConfig {
        sector_size: SectorSize(sector_size),
        challenge_count: CHALLENGES,
        sector_count: 1,
        typ: PoStType::Window,
        priority: false,
        api_version: storage_proofs_core::api_version::ApiVersion::V1_2_0,
    }
}

/// The first node the PoSt part of the audit challenges.
fn first_challenge(sector_size: u64, sector_id: u64, seed: &[u8; 32]) -> u64 {
    let id = SectorId::from(sector_id);
    let c = with_shape!(
        sector_size,
        generate_fallback_sector_challenges,
        &post_config(sector_size),
        &randomness(seed, sector_id),
        &[id],
        [0u8; 32]
    )
    .expect("challenges of a supported sector size");
    c[&id][0]
}

/// Flip the lowest bit of byte `at` of `file` (a test's injected fault).
fn flip(file: &Path, at: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(file).expect("the file to spoil");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).expect("a byte");
    f.write_all_at(&[b[0] ^ 1], at).expect("spoiled");
    log::warn!("{SPOIL_ENV}: flipped a bit of {} at byte {at}", file.display());
}

/// A tree file of `o`'s cache as PC2 left it (still `.tmp`).
fn tree_file(o: &SealedOutputs, kind: &str, k: usize, t: usize) -> PathBuf {
    o.cache.join(format!("{}.tmp", tree_name(kind, k, t)))
}

fn read_node(f: &Path, at: u64) -> Result<[u8; 32], String> {
    let file = std::fs::File::open(f).map_err(|e| format!("{}: {e}", f.display()))?;
    read_node_of(&file, f, at)
}

/// Node at byte `at` of `file`, open (named `f` in errors).
fn read_node_of(file: &std::fs::File, f: &Path, at: u64) -> Result<[u8; 32], String> {
    let mut b = [0u8; 32];
    file.read_exact_at(&mut b, at).map_err(|e| format!("{} at byte {at}: {e}", f.display()))?;
    Ok(b)
}

fn field(b: &[u8], what: impl Fn() -> String) -> Result<Fr, String> {
    let mut r = [0u8; 32];
    r.copy_from_slice(&b[..32]);
    Option::from(Fr::from_repr(r)).ok_or_else(|| format!("{} is not a field element", what()))
}

/// The spot checks of every sector at `spots`: one verdict per output.
fn spot_check(cfg: &BatchConfig, outputs: &[SealedOutputs], spots: &[u64]) -> Vec<Result<(), String>> {
    let mut verdicts: Vec<Result<(), String>> = vec![Ok(()); outputs.len()];
    let layers = cfg.num_layers();
    let mut rd = match sealer_slot::LayerReader::open(cfg) {
        Ok(rd) => rd,
        Err(e) => return vec![Err(format!("reading the layers for the spot checks: {e}")); outputs.len()],
    };
    let (rids, _) = sealer_slot::sector_ids(cfg);
    let api = sealer_slot::graph_api(cfg.api_version);
    let mut page = AlignedBuf::new(sealer_storage::PAGE);
    for &v in spots {
        // Every layer's row at v, and its labels recomputed from the parents' rows.
        let mut rows = Vec::with_capacity(layers);
        for layer in 1..=layers as u32 {
            let checked = (|| -> Result<Vec<u8>, String> {
                let row = rd.read_row(layer, v, &mut page).map_err(|e| e.to_string())?;
                let parents = sealer_graph::graph_parents(cfg.nodes(), cfg.porep_id, api, v);
                let np = if layer == 1 { 6 } else { 14 };
                let mut prows = Vec::new();
                if v > 0 {
                    for (k, &p) in parents.iter().enumerate().take(np) {
                        let l = if k < 6 { layer } else { layer - 1 };
                        prows.push(rd.read_row(l, p as u64, &mut page).map_err(|e| e.to_string())?);
                    }
                }
                for (i, o) in outputs.iter().enumerate() {
                    let s = o.index;
                    let pbuf: Vec<u8> = prows.iter().flat_map(|r| r[s * 32..s * 32 + 32].iter().copied()).collect();
                    let want = sealer_hash::reference_label(&rids[s], layer, v, &pbuf);
                    if want[..] != row[s * 32..s * 32 + 32] && verdicts[i].is_ok() {
                        verdicts[i] = Err(format!("layer {layer}'s label at node {v} does not match its parents"));
                    }
                }
                Ok(row)
            })();
            match checked {
                Ok(row) => rows.push(row),
                Err(e) => return vec![Err(format!("reading layer {layer} at node {v}: {e}")); outputs.len()],
            }
        }
        for (i, o) in outputs.iter().enumerate() {
            if verdicts[i].is_ok() {
                verdicts[i] = column_check(cfg, o, &rows, v);
            }
        }
    }
    verdicts
}

/// Sector `o` at node `v`: replica = last label + data, tree-c's leaf = the column's hash, and
/// tree-c's path from it to its root, whose combination is comm_c.
fn column_check(cfg: &BatchConfig, o: &SealedOutputs, rows: &[Vec<u8>], v: u64) -> Result<(), String> {
    let s = o.index;
    let sec = &cfg.sectors[s];
    let col: Vec<Fr> = rows
        .iter()
        .enumerate()
        .map(|(l, r)| field(&r[s * 32..s * 32 + 32], || format!("layer {}'s label at node {v}", l + 1)))
        .collect::<Result<_, _>>()?;
    let data = match &sec.data {
        None => Fr::ZERO,
        Some(_) => {
            let d = sealer_data::DataFile::open(sec, cfg.sector_size).map_err(|e| e.to_string())?;
            let mut b = [0u8; 32];
            d.read_nodes(v, &mut b).map_err(|e| d.read_failed(v, e))?;
            field(&b, || format!("data node {v}"))?
        }
    };
    let replica = read_node(&o.replica, v * 32)?;
    if replica != fr_bytes(&(col[col.len() - 1] + data)) {
        return Err(format!("the replica's node {v} is not its key plus its data"));
    }
    let t = base_tree_count(cfg.sector_size);
    let leaves = cfg.nodes() / t as u64;
    let (k, mut i) = ((v / leaves) as usize, v % leaves);
    let f = tree_file(o, "tree-c", k, t);
    let leaf = if col.len() == 2 { poseidon2(col[0], col[1]) } else { poseidon11(&col) };
    let mut node = fr_bytes(&leaf);
    let file = std::fs::File::open(&f).map_err(|e| format!("{}: {e}", f.display()))?;
    if read_node_of(&file, &f, i * 32)? != node {
        return Err(format!("tree-c's leaf of node {v} is not the hash of its column"));
    }
    // Up the tree: each group of 8 hashes to its parent in the file.
    let (mut level_off, mut size) = (0u64, leaves);
    while size > 1 {
        let group = i & !7;
        let kids: Vec<Fr> = (0..8)
            .map(|c| {
                let b = read_node_of(&file, &f, level_off + (group + c) * 32)?;
                field(&b, || format!("tree-c node {} of a level of {size}", group + c))
            })
            .collect::<Result<_, _>>()?;
        node = fr_bytes(&poseidon8(&kids));
        level_off += size * 32;
        size /= 8;
        i /= 8;
        if read_node_of(&file, &f, level_off + i * 32)? != node {
            return Err(format!("tree-c's path from node {v} does not hash to its stored parent"));
        }
    }
    let roots: Vec<Fr> = (0..t)
        .map(|k| {
            let f = tree_file(o, "tree-c", k, t);
            let len = std::fs::metadata(&f).map_err(|e| format!("{}: {e}", f.display()))?.len();
            field(&read_node(&f, len - 32)?, || format!("{}'s root", f.display()))
        })
        .collect::<Result<_, _>>()?;
    if fr_bytes(&combine_roots(&roots)) != o.comm_c {
        return Err("tree-c's roots do not combine to comm_c".into());
    }
    Ok(())
}

/// WindowPoSt vanilla proofs of sector `sector_id`'s outputs `o` for fresh challenges, each
/// verified.
fn post_check(sector_size: u64, sector_id: u64, o: &SealedOutputs, seed: &[u8; 32]) -> Result<(), String> {
    // filecoin-proofs reads the final names: a view of the cache with them, p_aux included.
    let view = o.cache.join(".audit");
    let _ = std::fs::remove_dir_all(&view);
    let made = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(&view)?;
        let t = base_tree_count(sector_size);
        for k in 0..t {
            let name = tree_name("tree-r-last", k, t);
            std::os::unix::fs::symlink(o.cache.join(format!("{name}.tmp")), view.join(&name))?;
        }
        let mut paux = o.comm_c.to_vec();
        paux.extend_from_slice(&o.comm_r_last);
        std::fs::write(view.join("p_aux"), paux)
    })();
    let r = made
        .map_err(|e| format!("preparing {}: {e}", view.display()))
        .and_then(|()| with_shape!(sector_size, post_proofs, sector_size, sector_id, o, &view, seed));
    let _ = std::fs::remove_dir_all(&view);
    r
}

fn post_proofs<Tree: 'static + MerkleTreeTrait>(
    sector_size: u64,
    sector_id: u64,
    o: &SealedOutputs,
    view: &Path,
    seed: &[u8; 32],
) -> Result<(), String> {
    let post = post_config(sector_size);
    let id = SectorId::from(sector_id);
    let rand = randomness(seed, sector_id);
    // The prover id takes no part in PoSt's challenges or their verification.
    let prover = [0u8; 32];
    let challenges = generate_fallback_sector_challenges::<Tree>(&post, &rand, &[id], prover)
        .map_err(|e| format!("WindowPoSt challenges: {e:#}"))?
        .remove(&id)
        .ok_or("no WindowPoSt challenges for the sector")?;
    let replica = PrivateReplicaInfo::<Tree>::new(o.replica.clone(), o.comm_r, view.to_path_buf())
        .map_err(|e| format!("opening the replica for WindowPoSt: {e:#}"))?;
    let proof = generate_single_vanilla_proof::<Tree>(&post, id, &replica, &challenges)
        .map_err(|e| format!("the WindowPoSt vanilla proof failed: {e:#}"))?;
    let domain = |b: &[u8; 32], what: &str| {
        <Tree::Hasher as filecoin_hashers::Hasher>::Domain::try_from_bytes(b).map_err(|e| format!("{what}: {e}"))
    };
    let pub_params = fallback::PublicParams {
        sector_size,
        challenge_count: CHALLENGES,
        sector_count: 1,
        api_version: post.api_version,
    };
    let pub_inputs = fallback::PublicInputs {
        randomness: domain(&rand, "randomness")?,
        prover_id: domain(&prover, "prover id")?,
        sectors: vec![fallback::PublicSector { id, comm_r: domain(&o.comm_r, "comm_r")? }],
        k: Some(0),
    };
    let ok = fallback::FallbackPoSt::<Tree>::verify(&pub_params, &pub_inputs, &proof.vanilla_proof)
        .map_err(|e| format!("verifying the WindowPoSt vanilla proof: {e:#}"))?;
    if !ok {
        return Err(format!(
            "a WindowPoSt vanilla proof over its replica and tree-r-last does not verify against comm_r_last and comm_r ({CHALLENGES} challenges)"
        ));
    }
    Ok(())
}

/// Flip one byte of `o`'s `what` file at the first point the audit reads ([`SPOIL_ENV`]).
fn spoil(cfg: &BatchConfig, o: &SealedOutputs, what: &str, seed: &[u8; 32], spot: u64) {
    let t = base_tree_count(cfg.sector_size);
    let leaves = cfg.nodes() / t as u64;
    let first_challenge = || first_challenge(cfg.sector_size, cfg.sectors[o.index].sector_id, seed);
    let (file, at) = match what {
        "replica" => (o.replica.clone(), first_challenge() * 32),
        "tree-c" => (tree_file(o, "tree-c", (spot / leaves) as usize, t), (spot % leaves) * 32),
        "tree-r-last" => {
            let c = first_challenge();
            let first = rows_to_discard(leaves) + 1;
            (tree_file(o, "tree-r-last", (c / leaves) as usize, t), ((c % leaves) >> (3 * first)) * 32)
        }
        other => panic!("{SPOIL_ENV}={other}: replica, tree-c or tree-r-last"),
    };
    flip(&file, at);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_depend_on_the_seed_and_stay_in_the_sector() {
        let (a, b) = (spot_nodes(&seed_of(1), 64), spot_nodes(&seed_of(2), 64));
        assert_eq!(a.len(), SPOT_NODES);
        assert!(a.iter().chain(&b).all(|&v| v < 64));
        assert_ne!(a, b);
        assert_eq!(a, spot_nodes(&seed_of(1), 64));
        let r = randomness(&seed_of(1), 7);
        assert!(bool::from(Fr::from_repr(r).is_some()), "the PoSt randomness is a field element");
    }
}
