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
    // The constants are made once: the tests hash tens of thousands of nodes on the CPU.
    static C2: OnceLock<PoseidonConstants<Fr, U2>> = OnceLock::new();
    static C8: OnceLock<PoseidonConstants<Fr, U8>> = OnceLock::new();
    static C11: OnceLock<PoseidonConstants<Fr, U11>> = OnceLock::new();
    match xs.len() {
        2 => Poseidon::new_with_preimage(xs, C2.get_or_init(PoseidonConstants::new)).hash(),
        8 => Poseidon::new_with_preimage(xs, C8.get_or_init(PoseidonConstants::new)).hash(),
        11 => Poseidon::new_with_preimage(xs, C11.get_or_init(PoseidonConstants::new)).hash(),
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

/// Random layer pages of `rows` rows (each row `sectors` nodes and some padding) and data.
struct Pages {
    bufs: Vec<Vec<u8>>,
    row: usize,
    data: Vec<Fr>,
}

impl Pages {
    fn random(rng: &mut ChaCha8Rng, layers: usize, sectors: usize, rows: usize) -> Pages {
        let row = sectors * NODE + 64; // rows may carry padding after the sectors
        let mut bufs = vec![vec![0u8; rows * row]; layers];
        for b in bufs.iter_mut() {
            for r in 0..rows {
                for s in 0..sectors {
                    b[r * row + s * NODE..][..NODE].copy_from_slice(&random_fr(rng).to_repr());
                }
            }
        }
        // Sector 0 is CC (data 0) when data is given, the others carry data.
        let data = (0..sectors * rows).map(|g| if g < rows { Fr::ZERO } else { random_fr(rng) }).collect();
        Pages { bufs, row, data }
    }

    fn slices(&self) -> Vec<&[u8]> {
        self.bufs.iter().map(|b| b.as_slice()).collect()
    }

    /// The range's data, `[sector][node]`.
    fn data_of(&self, sectors: usize, first_row: usize, count: usize) -> Vec<u8> {
        let rows = self.data.len() / sectors;
        (0..sectors).flat_map(|s| bytes_of(&self.data[s * rows + first_row..][..count])).collect()
    }

    /// What the device must compute, on the CPU: both trees' levels, level 0 first.
    fn expected(
        &self,
        sectors: usize,
        first_row: usize,
        count: usize,
        with_data: bool,
        levels: usize,
    ) -> [Vec<Vec<Fr>>; 2] {
        let layers = self.bufs.len();
        let rows = self.data.len() / sectors;
        let node = |l: usize, s: usize, i: usize| {
            Fr::from_repr(self.bufs[l][(first_row + i) * self.row + s * NODE..][..NODE].try_into().unwrap()).unwrap()
        };
        let (mut leaves, mut replica) = (Vec::new(), Vec::new());
        for s in 0..sectors {
            for i in 0..count {
                let col: Vec<Fr> = (0..layers).map(|l| node(l, s, i)).collect();
                leaves.push(neptune_hash(&col));
                let d = if with_data { self.data[s * rows + first_row + i] } else { Fr::ZERO };
                replica.push(col[layers - 1] + d);
            }
        }
        [leaves, replica].map(|level0| {
            let mut out = vec![level0];
            while out.len() < levels {
                let next = out.last().unwrap().chunks(8).map(neptune_hash).collect();
                out.push(next);
            }
            out
        })
    }
}

fn input<'a>(
    slices: &'a [&'a [u8]],
    p: &Pages,
    sectors: usize,
    first_row: usize,
    count: usize,
    data: Option<&'a [u8]>,
) -> RangeInput<'a> {
    RangeInput { layers: slices, row: p.row, first_row, count, sectors, data }
}

#[test]
fn pc2_range_equals_the_cpu_for_cc_and_data_sectors() {
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    // Ranges too small for a tree level on the device, and ranges with one.
    for (layers, sectors, count, first_row, with_data) in [
        (2, 3, 64, 0, true),
        (11, 2, 16, 8, false),
        (2, 1, 8, 0, false),
        (2, 3, 8192, 8, true),
        (11, 1, 16384, 0, false),
    ] {
        let p = Pages::random(&mut rng, layers, sectors, first_row + count + 3);
        let slices = p.slices();
        let data = p.data_of(sectors, first_row, count);
        let out = gpu()
            .pc2_range(&input(&slices, &p, sectors, first_row, count, with_data.then_some(data.as_slice())))
            .unwrap();
        let levels = out.levels();
        assert_eq!(levels, if sectors * count / 8 >= sealer_gpu::MIN_DEVICE_LEVEL { 2 } else { 1 }, "{count} rows");
        let [c, r] = p.expected(sectors, first_row, count, with_data, levels);
        for j in 0..levels {
            let what = format!("level {j} ({layers} layers, {sectors} sectors, {count} rows)");
            assert_eq!(frs_of(out.tree_c(j)), c[j], "tree-c {what}");
            match out.tree_r(j) {
                Some(got) => assert_eq!(frs_of(got), r[j], "tree-r {what}"),
                None => assert!(j == 0 && !with_data, "tree-r {what} was not read back"),
            }
        }
        assert!(sealer_gpu::check_range(
            &input(&slices, &p, sectors, first_row, count, with_data.then_some(data.as_slice())),
            &out,
            7
        )
        .is_ok());
    }
}

/// Ranges in flight on 1, 2 and 3 slots at once give what one range at a time gives, and a
/// CC run does not read its replica back.
#[test]
fn ranges_in_flight_equal_one_at_a_time() {
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    let (layers, sectors, count, ranges) = (2, 1, 1 << 14, 3);
    let p = Pages::random(&mut rng, layers, sectors, count * ranges);
    let slices = p.slices();
    let shape = sealer_gpu::RangeShape { layers, row: p.row, count, sectors, with_data: false, tree_r_from: 2 };
    assert_eq!(shape.levels(count), 2, "2^14 rows: levels of 2^14 and 2^11 nodes (2^8 is left to the CPU)");
    for n in [1usize, 2, 3] {
        let mut slots = gpu().slots(shape, n).unwrap();
        let mut outs = Vec::new();
        let mut queued = std::collections::VecDeque::new();
        for k in 0..ranges {
            if queued.len() == n {
                let (k0, i): (usize, usize) = queued.pop_front().unwrap();
                outs.push((k0, gpu().collect(&mut slots[i]).unwrap()));
            }
            let i = k % n;
            // SAFETY: the pages outlive the slots.
            unsafe { gpu().submit(&mut slots[i], &input(&slices, &p, sectors, k * count, count, None)).unwrap() };
            queued.push_back((k, i));
        }
        for (k, i) in queued {
            outs.push((k, gpu().collect(&mut slots[i]).unwrap()));
        }
        for (k, out) in &outs {
            let [c, r] = p.expected(sectors, k * count, count, false, 2);
            for (j, want) in c.iter().enumerate() {
                assert_eq!(&frs_of(out.tree_c(j)), want, "{n} in flight: range {k} tree-c level {j}");
            }
            assert!(out.tree_r(0).is_none(), "CC: the replica is not read back");
            // Level 1 is below the first stored level, but the device's top: the CPU hashes on.
            assert_eq!(frs_of(out.tree_r(1).unwrap()), r[1], "{n} in flight: range {k} tree-r level 1");
            assert!(
                sealer_gpu::check_range(&input(&slices, &p, sectors, k * count, count, None), out, *k as u64).is_ok()
            );
        }
        // Outputs held: the pool has one set more than the slots, so all but one must go back
        // before the slots take n more ranges. Dropping them returns their memory.
        drop(outs);
    }
}

/// A device that hashes wrongly is caught by the per-range check, whichever level it spoils.
#[test]
fn the_range_check_catches_a_spoiled_column_or_tree_node() {
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    let (layers, sectors, count) = (11, 2, 8192);
    let p = Pages::random(&mut rng, layers, sectors, count);
    let slices = p.slices();
    let data = p.data_of(sectors, 0, count);
    let shape = sealer_gpu::RangeShape { layers, row: p.row, count, sectors, with_data: true, tree_r_from: 1 };
    let mut slot = gpu().slots(shape, 1).unwrap().pop().unwrap();
    for (spoil, what) in [(Some("columns"), "tree-c level 0"), (Some("tree"), "tree-c level 1"), (None, "")] {
        slot.spoil_for_test(spoil);
        let r = input(&slices, &p, sectors, 0, count, Some(&data));
        unsafe { gpu().submit(&mut slot, &r).unwrap() };
        let out = gpu().collect(&mut slot).unwrap();
        let checked = sealer_gpu::check_range(&r, &out, rand::random());
        match spoil {
            Some(_) => assert!(checked.as_ref().is_err_and(|e| e.contains(what)), "{spoil:?}: {checked:?}"),
            None => assert_eq!(checked, Ok(2 * sealer_gpu::CHECK_SAMPLES), "columns and one level"),
        }
    }
}

/// An upload failing mid-range leaves no copy running: submit waits for the ones it started
/// before it returns the error, and the slot takes the next range.
#[test]
fn a_failed_upload_leaves_no_copy_in_flight() {
    let mut rng = ChaCha8Rng::seed_from_u64(rand::random());
    let (layers, sectors, count) = (11, 1, 4096);
    let p = Pages::random(&mut rng, layers, sectors, count);
    let slices = p.slices();
    let shape = sealer_gpu::RangeShape { layers, row: p.row, count, sectors, with_data: false, tree_r_from: 1 };
    let mut slot = gpu().slots(shape, 1).unwrap().pop().unwrap();
    slot.fail_upload_for_test(Some(2 * layers + 3)); // in the third chunk
    let r = input(&slices, &p, sectors, 0, count, None);
    let e = unsafe { gpu().submit(&mut slot, &r) }.expect_err("the injected failure");
    assert!(e.to_string().contains("copying layers to the device"), "{e}");
    assert_eq!(slot.uploads_in_flight(), 0);
    assert!(!slot.busy());
    slot.fail_upload_for_test(None);
    unsafe { gpu().submit(&mut slot, &r).unwrap() };
    let out = gpu().collect(&mut slot).unwrap();
    assert_eq!(frs_of(out.tree_c(0)), p.expected(sectors, 0, count, false, 1)[0][0]);
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

/// The copy probe measures every path on one and two queues, and the bytes arrive.
#[test]
fn the_copy_probe_measures_every_path() {
    let rates = gpu().copy_probe(4 << 20).unwrap();
    assert_eq!(rates.len(), 8, "4 paths x 1 and 2 queues");
    for r in &rates {
        assert!(r.gb_per_s > 0.0 && r.bytes == 4 << 20, "{r:?}");
    }
}
