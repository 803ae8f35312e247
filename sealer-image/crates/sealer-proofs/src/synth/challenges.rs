//! The synthetic challenges of a sector (filecoin-proofs' `SynthChallengeGenerator`, whose type
//! storage-proofs does not export): ChaCha20 keyed by a keyed BLAKE2b of the replica id and
//! comm_r gives 32 bytes per challenge, read as a little-endian integer and mapped onto the
//! nodes other than node 0.

use chacha20::cipher::{KeyIvInit, StreamCipher};

/// filecoin-proofs' `DEFAULT_SYNTH_CHALLENGE_COUNT`.
const MAX_CHALLENGES: u64 = 1 << 18;

/// The BLAKE2b key of the generation PRF.
const GENERATION_KEY: &[u8] = b"filecoin.io|PoRep|1|Synthetic|1|Generation";

/// The ChaCha20 nonce.
const NONCE: &[u8; 12] = b"synth-porep\x00";

/// Every synthetic challenge of a sector of `nodes` nodes, in order: min(nodes, 2^18) of them.
pub fn synthetic(nodes: u64, replica_id: &[u8; 32], comm_r: &[u8; 32]) -> Vec<u64> {
    let key = blake2b_simd::Params::new()
        .hash_length(32)
        .key(GENERATION_KEY)
        .to_state()
        .update(replica_id)
        .update(comm_r)
        .finalize();
    let mut prf = chacha20::ChaCha20::new(key.as_bytes().into(), NONCE.into());
    let mut bytes = vec![0u8; (nodes.min(MAX_CHALLENGES) * 32) as usize];
    prf.apply_keystream(&mut bytes);
    bytes.chunks(32).map(|b| 1 + mod_le(b, nodes - 1)).collect()
}

/// A little-endian integer modulo `m`.
fn mod_le(b: &[u8], m: u64) -> u64 {
    b.iter().rev().fold(0u128, |r, &x| ((r << 8) | x as u128) % m as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_hashers::{poseidon::PoseidonDomain, Domain};
    use rand::{Rng, SeedableRng};
    use storage_proofs_porep::stacked::Challenges;

    /// storage-proofs' porep challenges of a partition are synthetic challenges picked by
    /// index: ours at those indexes are theirs, for random sectors of every size class.
    #[test]
    fn challenges_are_storage_proofs() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(36);
        for nodes in [64u64, 1 << 18, 1 << 24, 1 << 30] {
            let (rid, comm_r, seed): ([u8; 32], [u8; 32], [u8; 32]) = (rng.gen(), rng.gen(), rng.gen());
            let (mut rid, mut comm_r) = (rid, comm_r);
            rid[31] &= 0x3f;
            comm_r[31] &= 0x3f;
            let ours = synthetic(nodes, &rid, &comm_r);
            assert_eq!(ours.len() as u64, nodes.min(MAX_CHALLENGES));
            let Challenges::Synth(s) = Challenges::new_synthetic(18) else { unreachable!() };
            let (r, c) =
                (PoseidonDomain::try_from_bytes(&rid).unwrap(), PoseidonDomain::try_from_bytes(&comm_r).unwrap());
            for k in 0..3u8 {
                let idx = s.derive_indexes(nodes as usize, &r, &c, &seed, k);
                let theirs = s.derive(nodes as usize, &r, &c, &seed, k);
                for (i, t) in idx.iter().zip(&theirs) {
                    assert_eq!(ours[*i], *t as u64, "nodes {nodes}, challenge {i}");
                }
            }
        }
    }
}
