//! The kernels against neptune on random inputs, on the OpenCL device the tests are given:
//! `SEALER_GPU_DEVICE` (an index of `sealer_gpu::devices()`), else device 0 (pocl's CPU device
//! on a machine without a GPU; `hack/host-deps.sh` installs it). No device fails the tests:
//! the GPU engine's correctness is never optional.

use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use generic_array::typenum::{U11, U2, U8};
use neptune::poseidon::{Poseidon, PoseidonConstants};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sealer_gpu::{Gpu, Kernels, RangeInput, NODE};
use std::sync::OnceLock;

fn device_index() -> usize {
    std::env::var("SEALER_GPU_DEVICE").ok().map_or(0, |s| s.parse().expect("SEALER_GPU_DEVICE is an index"))
}

fn open(kernels: Kernels) -> Gpu {
    Gpu::open_with(Some(device_index()), kernels).unwrap_or_else(|e| {
        panic!("{e}: the GPU engine's tests need an OpenCL device (run hack/host-deps.sh for pocl's CPU device)")
    })
}

fn gpu() -> &'static Gpu {
    static G: OnceLock<Gpu> = OnceLock::new();
    G.get_or_init(|| open(Kernels::Default))
}

fn random_fr(rng: &mut ChaCha8Rng) -> Fr {
    Fr::random(&mut *rng)
}

fn bytes_of(xs: &[Fr]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_repr()).collect()
}

fn frs_of(b: &[u8]) -> Vec<Fr> {
    b.chunks(NODE).map(|c| Fr::from_repr(c.try_into().unwrap()).expect("canonical output")).collect()
}

fn neptune_hash(xs: &[Fr]) -> Fr {
    match xs.len() {
        2 => Poseidon::new_with_preimage(xs, &PoseidonConstants::<Fr, U2>::new()).hash(),
        8 => Poseidon::new_with_preimage(xs, &PoseidonConstants::<Fr, U8>::new()).hash(),
        11 => Poseidon::new_with_preimage(xs, &PoseidonConstants::<Fr, U11>::new()).hash(),
        n => panic!("arity {n}"),
    }
}

#[test]
fn hash_groups_equal_neptune_for_every_arity() {
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    for arity in [2usize, 8, 11] {
        let mut input: Vec<Fr> = (0..arity * 37).map(|_| random_fr(&mut rng)).collect();
        // Edge values: 0, 1 and p - 1.
        input[0] = Fr::ZERO;
        input[1] = Fr::ONE;
        input[2] = -Fr::ONE;
        let (out, _) = gpu().hash_groups(arity, &bytes_of(&input)).unwrap();
        let want: Vec<Fr> = input.chunks(arity).map(neptune_hash).collect();
        assert_eq!(frs_of(&out), want, "arity {arity}");
    }
}

/// A range of interleaved layers as PC1 leaves them, its expected levels computed on the CPU.
#[test]
fn every_kernel_variant_hashes_as_neptune() {
    // The default kernels are tested everywhere below; here the others, which benches compare
    // it with, on the same random inputs (each also passed its self-check when it was built).
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    for kernels in [Kernels::Portable, Kernels::Baseline] {
        let g = open(kernels);
        for arity in [2usize, 8, 11] {
            let input: Vec<Fr> = (0..arity * 19).map(|_| random_fr(&mut rng)).collect();
            let (out, _) = g.hash_groups(arity, &bytes_of(&input)).unwrap();
            let want: Vec<Fr> = input.chunks(arity).map(neptune_hash).collect();
            assert_eq!(frs_of(&out), want, "{} kernels, arity {arity}", kernels.name());
        }
    }
}

/// A register cap is NVIDIA's build option: a device whose compiler lacks
/// cl_nv_compiler_options refuses it by name rather than building without it.
#[test]
fn a_register_cap_is_refused_off_nvidia() {
    let g = open(Kernels::Default);
    if g.info().vendor.to_ascii_lowercase().contains("nvidia") {
        let capped = g.with_max_registers(64).unwrap();
        let input: Vec<Fr> = (0..8 * 5).map(|i| Fr::from(i as u64)).collect();
        let (out, _) = capped.hash_groups(8, &bytes_of(&input)).unwrap();
        assert_eq!(frs_of(&out), input.chunks(8).map(neptune_hash).collect::<Vec<_>>());
        return;
    }
    let err = g.with_max_registers(64).err().expect("a cap off NVIDIA").to_string();
    assert!(err.contains("does not take a register cap (no cl_nv_compiler_options"), "{err}");
}

#[test]
fn pc2_range_equals_the_cpu_for_cc_and_data_sectors() {
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    for (layers, sectors, count, first_row, with_data) in
        [(2, 3, 64, 0, true), (11, 2, 16, 8, false), (2, 1, 8, 0, false)]
    {
        let rows = first_row + count + 3;
        let row = sectors * NODE + 64; // rows may carry padding after the sectors
        let mut bufs = vec![vec![0u8; rows * row]; layers];
        for b in bufs.iter_mut() {
            for r in 0..rows {
                for s in 0..sectors {
                    b[r * row + s * NODE..][..NODE].copy_from_slice(&random_fr(&mut rng).to_repr());
                }
            }
        }
        // Sector 0 is CC (data 0) when data is given, the others carry data.
        let data: Vec<Fr> =
            (0..sectors * count).map(|g| if g < count { Fr::ZERO } else { random_fr(&mut rng) }).collect();
        let data_bytes = bytes_of(&data);
        let slices: Vec<&[u8]> = bufs.iter().map(|b| b.as_slice()).collect();
        let out = gpu()
            .pc2_range(&RangeInput {
                layers: &slices,
                row,
                first_row,
                count,
                sectors,
                data: with_data.then_some(data_bytes.as_slice()),
            })
            .unwrap();
        let node = |l: usize, s: usize, i: usize| {
            Fr::from_repr(bufs[l][(first_row + i) * row + s * NODE..][..NODE].try_into().unwrap()).unwrap()
        };
        let mut leaves = Vec::new();
        let mut replica = Vec::new();
        for s in 0..sectors {
            for i in 0..count {
                let col: Vec<Fr> = (0..layers).map(|l| node(l, s, i)).collect();
                leaves.push(neptune_hash(&col));
                let d = if with_data { data[s * count + i] } else { Fr::ZERO };
                replica.push(col[layers - 1] + d);
            }
        }
        for (name, levels, level0) in [("tree-c", &out.tree_c, leaves), ("tree-r", &out.tree_r, replica)] {
            let mut want = level0;
            let mut per = count;
            for (j, got) in levels.iter().enumerate() {
                assert_eq!(frs_of(got), want, "{name} level {j} ({layers} layers, {sectors} sectors)");
                if j + 1 < levels.len() {
                    want = want.chunks(8).map(neptune_hash).collect();
                    per /= 8;
                }
            }
            // Levels go up while every sector's count is a multiple of 8.
            assert!(per % 8 != 0 || per == 1 || per < 8, "{name} stopped early at {per} per sector");
        }
    }
}

#[test]
fn tree8_builds_every_level_to_the_root() {
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    let sectors = 2;
    let leaves: Vec<Fr> = (0..sectors * 64).map(|_| random_fr(&mut rng)).collect();
    let (levels, _) = gpu().tree8(&bytes_of(&leaves), sectors).unwrap();
    assert_eq!(levels.len(), 3, "64 → 8 → 1");
    for s in 0..sectors {
        let l1: Vec<Fr> = leaves[s * 64..][..64].chunks(8).map(neptune_hash).collect();
        assert_eq!(frs_of(&levels[2])[s], neptune_hash(&l1), "root of sector {s}");
    }
}

#[test]
fn a_missing_device_is_an_error_that_lists_the_devices() {
    let e = Gpu::open(Some(999)).err().expect("device 999 does not exist");
    assert!(e.to_string().contains("no OpenCL device 999"), "{e}");
}
