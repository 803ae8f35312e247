//! The per-range check: a few random columns and tree nodes of every level a device computed,
//! recomputed on the CPU with neptune from the range's own inputs. A device that hashes wrongly
//! (a miscompiled kernel, a faulty card) fails its range before anything of it is written. The
//! program-build self-check covers fixed inputs; this covers the shapes and data a run uses.

use crate::{neptune_hashes, RangeInput, RangeOutput, NODE};
use blstrs::Scalar as Fr;
use ff::PrimeField;

/// Nodes checked per level and tree, per range.
pub const SAMPLES: usize = 4;

fn fr(b: &[u8]) -> Result<Fr, String> {
    Option::from(Fr::from_repr(b.try_into().expect("32 bytes")))
        .ok_or_else(|| format!("{} is not a field element", crate::hex_of(b)))
}

fn hash(arity: usize, xs: &[Fr]) -> Fr {
    neptune_hashes(arity, xs)[0]
}

/// A small deterministic generator (splitmix64) for the sample positions.
struct Picks(u64);

impl Picks {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// Check `out` against `r`, the range it was computed from: [`SAMPLES`] column hashes and
/// replica nodes, and as many nodes of each tree level, at positions drawn from `seed`. Levels
/// the device did not read back are recomputed from the layers. Returns the nodes checked, or
/// what differed (sector, level and node within the range).
pub fn check_range(r: &RangeInput, out: &RangeOutput, seed: u64) -> Result<usize, String> {
    let layers = r.layers.len();
    let (count, sectors) = (r.count, r.sectors);
    let mut picks = Picks(seed);
    let node_at = |bytes: &[u8], s: usize, per: usize, i: usize| -> Result<Fr, String> {
        fr(&bytes[(s * per + i) * NODE..][..NODE])
    };
    // Tree-r's leaf: the last layer's label (the key), plus the data.
    let replica = |s: usize, i: usize| -> Result<Fr, String> {
        let off = (r.first_row + i) * r.row + s * NODE;
        let key = fr(&r.layers[layers - 1][off..off + NODE])?;
        Ok(match r.data {
            Some(d) => key + fr(&d[(s * count + i) * NODE..][..NODE])?,
            None => key,
        })
    };
    // Tree-r's node `i` of level `j` from what was read back, else from the level below.
    fn tree_r_node(
        out: &RangeOutput,
        replica: &dyn Fn(usize, usize) -> Result<Fr, String>,
        s: usize,
        j: usize,
        i: usize,
    ) -> Result<Fr, String> {
        let per = out.count() >> (3 * j);
        match out.tree_r(j) {
            Some(b) => fr(&b[(s * per + i) * NODE..][..NODE]),
            None if j == 0 => replica(s, i),
            None => {
                let kids =
                    (0..8).map(|k| tree_r_node(out, replica, s, j - 1, 8 * i + k)).collect::<Result<Vec<_>, _>>()?;
                Ok(hash(8, &kids))
            }
        }
    }
    let differ = |what: &str, s: usize, j: usize, i: usize, got: Fr, want: Fr| {
        (got != want).then(|| {
            format!(
                "{what} level {j} node {i} of sector {s} is {} where the CPU computes {}",
                crate::hex_of(got.to_repr().as_ref()),
                crate::hex_of(want.to_repr().as_ref())
            )
        })
    };
    let mut checked = 0;
    for _ in 0..SAMPLES {
        let (s, i) = (picks.below(sectors), picks.below(count));
        let col = (0..layers)
            .map(|l| fr(&r.layers[l][(r.first_row + i) * r.row + s * NODE..][..NODE]))
            .collect::<Result<Vec<_>, _>>()?;
        let got = node_at(out.tree_c(0), s, count, i)?;
        if let Some(e) = differ("tree-c", s, 0, i, got, hash(layers, &col)) {
            return Err(e);
        }
        if let Some(b) = out.tree_r(0) {
            if let Some(e) = differ("tree-r-last", s, 0, i, node_at(b, s, count, i)?, replica(s, i)?) {
                return Err(e);
            }
        }
        checked += 1;
    }
    for j in 1..out.levels() {
        let per = count >> (3 * j);
        for _ in 0..SAMPLES {
            let (s, i) = (picks.below(sectors), picks.below(per));
            let kids =
                (0..8).map(|k| node_at(out.tree_c(j - 1), s, per * 8, 8 * i + k)).collect::<Result<Vec<_>, _>>()?;
            if let Some(e) = differ("tree-c", s, j, i, node_at(out.tree_c(j), s, per, i)?, hash(8, &kids)) {
                return Err(e);
            }
            if let Some(b) = out.tree_r(j) {
                let kids =
                    (0..8).map(|k| tree_r_node(out, &replica, s, j - 1, 8 * i + k)).collect::<Result<Vec<_>, _>>()?;
                if let Some(e) = differ("tree-r-last", s, j, i, node_at(b, s, per, i)?, hash(8, &kids)) {
                    return Err(e);
                }
            }
            checked += 1;
        }
    }
    Ok(checked)
}
