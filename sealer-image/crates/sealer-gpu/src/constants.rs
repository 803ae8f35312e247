//! neptune's Poseidon constants, flattened for the kernels (see `poseidon.cl` for the layout).

use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use neptune::poseidon::{Arity, PoseidonConstants};

/// One arity's constants as the kernels read them, and the shape they were built for.
pub(crate) struct Flat {
    /// Hash arity (preimage length).
    pub arity: usize,
    /// Full rounds / 2.
    pub half: usize,
    /// Partial rounds.
    pub partial: usize,
    /// Montgomery-form field elements, 32 bytes each.
    pub bytes: Vec<u8>,
}

/// `x` in Montgomery form (x·2^256 mod p), as the GPU field code stores it.
pub(crate) fn mont_bytes(x: &Fr) -> [u8; 32] {
    (x * r()).to_repr()
}

fn r() -> Fr {
    Fr::from(2u64).pow_vartime([256u64])
}

/// Flatten `c`: domain tag, compressed round constants, m, the pre-sparse matrix, then each
/// sparse matrix's w_hat and v_rest.
pub(crate) fn flatten<A: Arity<Fr>>(c: &PoseidonConstants<Fr, A>) -> Flat {
    let width = A::to_usize() + 1;
    assert_eq!(c.full_rounds, 2 * c.half_full_rounds, "neptune's full rounds are two halves");
    assert_eq!(
        c.compressed_round_constants.len(),
        2 * c.half_full_rounds * width + c.partial_rounds,
        "compressed round constants: one set before the first round, one after each full round but the last, one per partial round"
    );
    assert_eq!(c.sparse_matrixes.len(), c.partial_rounds, "one sparse matrix per partial round");
    let mut out = Vec::new();
    let mut push = |x: &Fr| out.extend_from_slice(&mont_bytes(x));
    push(&c.domain_tag);
    c.compressed_round_constants.iter().for_each(&mut push);
    for m in [&c.mds_matrices.m, &c.pre_sparse_matrix] {
        assert_eq!(m.len(), width);
        m.iter().flatten().for_each(&mut push);
    }
    for sp in &c.sparse_matrixes {
        assert_eq!((sp.w_hat.len(), sp.v_rest.len()), (width, width - 1));
        sp.w_hat.iter().chain(&sp.v_rest).for_each(&mut push);
    }
    Flat { arity: A::to_usize(), half: c.half_full_rounds, partial: c.partial_rounds, bytes: out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn montgomery_form_of_one_is_r() {
        // R mod p for BLS12-381's scalar field, little-endian (blstrs' `R`).
        let r_limbs: [u64; 4] = [0x00000001fffffffe, 0x5884b7fa00034802, 0x998c4fefecbc4ff5, 0x1824b159acc5056f];
        let b = mont_bytes(&Fr::ONE);
        let got: Vec<u64> = b.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, r_limbs);
    }
}
