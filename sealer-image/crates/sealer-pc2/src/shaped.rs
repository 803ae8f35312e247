//! PC2 of a 32 GiB sector's shape on the GPU engine, without a slot: one of its base trees
//! (2^27 leaves, 11 layers; a 32 GiB sector has 8 of them, hashed one after another) through
//! the same range pipeline as a batch (layers generated while the devices hash, outputs checked
//! and built into the trees while the next range hashes), from labels that are a keyed hash of
//! (layer, node) instead of PC1's. Lent GPU machines have too little disk for a real 32 GiB
//! sector's 352 GiB of layers; PC2's work does not depend on the label values.
//!
//! Checked by sampling: columns recomputed with neptune from the same generator, tree nodes at
//! every level the device computed and read back recomputed from their 8 children (tree-r-last's
//! leaves, the replica, are the last layer's labels: a CC sector's replica never comes back
//! from the device), and each tree's root recomputed from the device's top level. Every range
//! also passes PC2's own per-range check.

use crate::engine::{self, Hashed};
use crate::{fr, fr_bytes, poseidon11, poseidon2, poseidon8, TreeBuilder};
use blstrs::Scalar as Fr;
use rayon::prelude::*;
use sealer_error::SealerError;
use sealer_gpu::{Gpu, NODE};
use std::time::Instant;

/// What to run.
pub struct Shape {
    /// log2 of the base tree's leaves: 27 for a 32 GiB sector (a multiple of 3, so that the
    /// arity-8 tree is whole).
    pub leaves_log2: u32,
    /// Layers: 11 for 32 and 64 GiB sectors (2 for the small test sizes).
    pub layers: usize,
    /// Nodes checked at each level of each tree, spread over the ranges (every node when this
    /// is at least the level's size).
    pub samples: u64,
    /// log2 of the range (None: what the devices and host buffers hold, as in a batch).
    pub range_log2: Option<u32>,
    /// Tests: one node of layer 1 whose label differs from the generator's.
    pub spoil: Option<u64>,
    /// The generator's key.
    pub seed: u64,
}

/// Base trees in a 32 GiB sector.
pub const BASE_TREES_32GIB: u64 = 8;

/// Where the time went, seconds.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Stages {
    /// The first range's labels, and generating beyond hashing.
    pub generate_wait: f64,
    /// The devices' ranges as the pipeline sees them (copies in, kernels, copies out).
    pub hash: f64,
    /// Checking samples and building the trees' upper levels, on the writer thread.
    pub check_and_build: f64,
    /// Waiting for that thread beyond hashing.
    pub check_wait: f64,
    /// Device time: kernels and copies (summed over the devices).
    pub device: sealer_gpu::DeviceTime,
    /// From the first label generated to both roots.
    pub total: f64,
}

/// The run's figures and checks.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ShapeReport {
    /// The devices (names).
    pub devices: Vec<String>,
    /// Leaves of the base tree.
    pub leaves: u64,
    /// Layers.
    pub layers: usize,
    /// Nodes per range, and ranges.
    pub range: u64,
    /// Ranges hashed.
    pub ranges: u64,
    /// Stage seconds.
    pub stages: Stages,
    /// Kernels' share of the wall time, per device.
    pub device_busy_fraction: f64,
    /// The base tree's seconds × 8 at a 32 GiB sector's shape (2^27 leaves, 11 layers; None
    /// at other shapes).
    pub predicted_seconds_per_32gib_sector: Option<f64>,
    /// Device memory the engine allocates for one range part at its largest (layers, leaves,
    /// replica, levels), bytes.
    pub device_memory_high_water_bytes: u64,
    /// Host memory of the sets of layer buffers, bytes.
    pub host_buffer_bytes: u64,
    /// Ranges on each device at once.
    pub in_flight: usize,
    /// Nodes checked: columns (tree-c leaves), tree nodes above the leaves, roots.
    pub checked: Checked,
    /// The first mismatches (empty when everything checked agrees).
    pub mismatches: Vec<String>,
    /// The roots, hex.
    pub root_c: String,
    /// tree-r-last's root, hex.
    pub root_r: String,
}

/// Counts of checks.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Checked {
    /// tree-c leaves recomputed from the generator.
    pub columns: u64,
    /// Tree nodes above the leaves recomputed from their children (both trees).
    pub tree_nodes: u64,
    /// Roots recomputed from the device's top level (both trees).
    pub roots: u64,
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The label of `node` in `layer` (1-based): 32 bytes below 2^254, so a field element.
pub fn label(seed: u64, layer: usize, node: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let base = splitmix(seed ^ ((layer as u64) << 56)) ^ node.wrapping_mul(4);
    for (k, limb) in out.chunks_mut(8).enumerate() {
        let mut x = splitmix(base.wrapping_add(k as u64));
        if k == 3 {
            x &= (1 << 62) - 1;
        }
        limb.copy_from_slice(&x.to_le_bytes());
    }
    out
}

fn generate(seed: u64, bufs: &mut [sealer_storage::AlignedBuf], v: u64, spoil: Option<u64>) {
    for (l, b) in bufs.iter_mut().enumerate() {
        b.as_mut_slice()
            .par_chunks_mut(NODE)
            .enumerate()
            .for_each(|(i, n)| n.copy_from_slice(&label(seed, l + 1, v + i as u64)));
    }
    if let Some(x) = spoil.filter(|x| (v..v + (bufs[0].len() / NODE) as u64).contains(x)) {
        bufs[0].as_mut_slice()[(x - v) as usize * NODE] ^= 1;
    }
}

/// Indices checked in a run of `len` nodes: all of them, or `k` spread by the key.
fn picks(len: u64, k: u64, key: u64) -> Vec<u64> {
    if k >= len {
        return (0..len).collect();
    }
    (0..k).map(|j| splitmix(key ^ j) % len).collect()
}

struct Checker<'a> {
    shape: &'a Shape,
    leaves: u64,
    checked: Checked,
    mismatches: Vec<String>,
}

impl Checker<'_> {
    fn differ(&mut self, what: String) {
        if self.mismatches.len() < 10 {
            self.mismatches.push(what);
        }
    }

    /// Samples of one part of a hashed range: rows `[first, first + count)`.
    fn part(&mut self, first: u64, count: usize, out: &sealer_gpu::RangeOutput) {
        let s = self.shape;
        let leaves = self.leaves;
        let per_level = |len: u64| (s.samples * len).div_ceil(leaves).max(1);
        for i in picks(count as u64, per_level(count as u64), s.seed ^ first) {
            let node = first + i;
            let col: Vec<Fr> = (1..=s.layers).map(|l| fr(&label(s.seed, l, node))).collect();
            let leaf = if s.layers == 2 { poseidon2(col[0], col[1]) } else { poseidon11(&col) };
            if out.tree_c(0)[i as usize * NODE..][..NODE] != fr_bytes(&leaf) {
                self.differ(format!("tree-c leaf {node}: the device's column hash differs from neptune's"));
            }
            self.checked.columns += 1;
        }
        // tree-r-last's leaves are the last layer's labels (CC).
        let replica = |i: usize| label(s.seed, s.layers, first + i as u64);
        for j in 1..out.levels() {
            let len = (count >> (3 * j)) as u64;
            for i in picks(len, per_level(len), s.seed ^ first ^ (j as u64) << 48) {
                let i = i as usize;
                let c_kids: Vec<Fr> = (0..8).map(|c| fr(&out.tree_c(j - 1)[(i * 8 + c) * NODE..][..NODE])).collect();
                let r_kids: Option<Vec<Fr>> = match (j, out.tree_r(j - 1)) {
                    (_, Some(b)) => Some((0..8).map(|c| fr(&b[(i * 8 + c) * NODE..][..NODE])).collect()),
                    (1, None) => Some((0..8).map(|c| fr(&replica(i * 8 + c))).collect()),
                    _ => None, // below the first stored level: PC2's own check recomputes it
                };
                let checks = [("tree-c", Some(out.tree_c(j)), Some(c_kids)), ("tree-r-last", out.tree_r(j), r_kids)];
                for (name, level, kids) in checks {
                    let (Some(level), Some(kids)) = (level, kids) else { continue };
                    if level[i * NODE..][..NODE] != fr_bytes(&poseidon8(&kids)) {
                        self.differ(format!(
                            "{name} level {j} node {}: not the hash of its children",
                            (first >> (3 * j)) + i as u64
                        ));
                    }
                    self.checked.tree_nodes += 1;
                }
            }
        }
    }
}

/// The root over `top` (a level of a whole arity-8 tree, in order), hashed up on the CPU.
fn root_of(mut level: Vec<Fr>) -> Fr {
    while level.len() > 1 {
        level = level.chunks(8).map(poseidon8).collect();
    }
    level[0]
}

/// Run `shape` on `gpus`.
pub fn run(gpus: &[Gpu], shape: &Shape) -> Result<ShapeReport, SealerError> {
    let input = |why: String| SealerError::Input(why);
    if !shape.leaves_log2.is_multiple_of(3) || shape.leaves_log2 < 3 {
        return Err(input(format!("leaves 2^{}: give a multiple of 3 (27 for 32 GiB)", shape.leaves_log2)));
    }
    if shape.layers != 2 && shape.layers != 11 {
        return Err(input(format!("{} layers: PC2 hashes columns of 2 or 11", shape.layers)));
    }
    let leaves = 1u64 << shape.leaves_log2;
    let npp = (sealer_storage::PAGE / NODE) as u64;
    let budget = engine::gpu_budget_of(gpus, leaves, npp, 1, shape.layers);
    let range = match shape.range_log2 {
        Some(r) => (1u64 << r).clamp(8, leaves),
        None => budget.range,
    };
    let ranges: Vec<(u64, u64)> = (0..leaves).step_by(range as usize).map(|v| (v, range.min(leaves - v))).collect();
    let in_flight = budget.in_flight;
    let mut sets: Vec<Vec<sealer_storage::AlignedBuf>> = (0..in_flight + 1)
        .map(|_| (0..shape.layers).map(|_| engine::host_buffer(gpus, range as usize * NODE)).collect())
        .collect();
    let parts = engine::parts(range, gpus.len());
    let c = range as usize / parts;
    let rtd = crate::rows_to_discard(leaves);
    let sh = sealer_gpu::RangeShape {
        layers: shape.layers,
        row: NODE,
        count: c,
        sectors: 1,
        with_data: false,
        tree_r_from: rtd + 1,
    };
    // Declared after the buffers, so dropped (its copies waited for) before them.
    let mut pipeline = engine::Pipeline::new(gpus, parts, sh, in_flight)?;
    let mut tc = TreeBuilder::detached(leaves, usize::MAX);
    let mut tr = TreeBuilder::detached(leaves, usize::MAX);
    let mut checker = Checker { shape, leaves, checked: Checked::default(), mismatches: Vec::new() };
    let (mut top_c, mut top_r) = (Vec::new(), Vec::new());
    let mut st = Stages::default();
    let started = Instant::now();
    generate(shape.seed, &mut sets[0], 0, shape.spoil);
    st.generate_wait += started.elapsed().as_secs_f64();
    let high_water = in_flight as u64 * sh.device_bytes() as u64;
    let io = |e: std::io::Error| SealerError::Internal(format!("building the trees in memory: {e}"));
    let mut consume =
        |h: Hashed, c: &mut Checker, tc: &mut TreeBuilder, tr: &mut TreeBuilder| -> std::io::Result<f64> {
            let t = Instant::now();
            for (p, (first, count, out)) in h.parts().enumerate() {
                c.part(first, count, out);
                let levels = out.levels();
                let r_level = |j: usize| if j == 0 { Some(h.replica(p)) } else { out.tree_r(j) };
                engine::put_levels(tc, |j| Some(out.tree_c(j)), levels, count, 0)?;
                engine::put_levels(tr, r_level, levels, count, 0)?;
                top_c.extend(out.tree_c(levels - 1).chunks(NODE).map(fr));
                top_r.extend(r_level(levels - 1).expect("the top comes back").chunks(NODE).map(fr));
            }
            Ok(t.elapsed().as_secs_f64())
        };
    let no_data: Vec<Option<Vec<u8>>> = vec![None; parts];
    let mut flights = std::collections::VecDeque::new();
    let collect = |pl: &mut engine::Pipeline,
                   sets: &[Vec<sealer_storage::AlignedBuf>],
                   st: &mut Stages,
                   flights: &mut std::collections::VecDeque<usize>| {
        let t = Instant::now();
        let (mut h, time) = pl.collect()?;
        st.hash += t.elapsed().as_secs_f64();
        st.device += time;
        let set = flights.pop_front().expect("a range in flight");
        let slices = crate::part_layers(&sets[set], NODE, 0, c, parts);
        h.check(gpus, &crate::part_inputs(&slices, &no_data, NODE, c, 1), shape.seed)?;
        Ok::<_, SealerError>(h)
    };
    for (i, &(v, _)) in ranges.iter().enumerate() {
        let (ci, ni) = (i % sets.len(), (i + 1) % sets.len());
        let done = if pipeline.full() { Some(collect(&mut pipeline, &sets, &mut st, &mut flights)?) } else { None };
        let (cur, next) = crate::pick(&mut sets, ci, ni);
        let slices = crate::part_layers(cur, NODE, 0, c, parts);
        let inputs = crate::part_inputs(&slices, &no_data, NODE, c, 1);
        let (submitted, checked) = std::thread::scope(|sc| {
            let generator = ranges.get(i + 1).map(|&(nv, _)| {
                sc.spawn(move || {
                    generate(shape.seed, next, nv, shape.spoil);
                })
            });
            let (checker, tcw, trw, consume) = (&mut checker, &mut tc, &mut tr, &mut consume);
            let writer = done.map(|h| sc.spawn(move || consume(h, checker, tcw, trw)));
            let t0 = Instant::now();
            // SAFETY: `cur` is not generated into again before this range is collected, and
            // `sets` outlives the pipeline.
            let submitted = unsafe { pipeline.submit(&inputs, v) };
            flights.push_back(ci);
            st.hash += t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let checked = writer.map(|h| h.join().expect("checker panicked"));
            st.check_wait += t1.elapsed().as_secs_f64();
            let t2 = Instant::now();
            if let Some(g) = generator {
                g.join().expect("generator panicked");
            }
            st.generate_wait += t2.elapsed().as_secs_f64();
            (submitted, checked)
        });
        if let Some(c) = checked {
            st.check_and_build += c.map_err(io)?;
        }
        submitted?;
    }
    while !pipeline.is_empty() {
        let h = collect(&mut pipeline, &sets, &mut st, &mut flights)?;
        let t1 = Instant::now();
        st.check_and_build += consume(h, &mut checker, &mut tc, &mut tr).map_err(io)?;
        st.check_wait += t1.elapsed().as_secs_f64();
    }
    let (root_c, root_r) = (tc.finish().map_err(io)?, tr.finish().map_err(io)?);
    for (name, top, root) in [("tree-c", top_c, root_c), ("tree-r-last", top_r, root_r)] {
        if root_of(top) != root {
            checker.differ(format!("{name}'s root differs from the one recomputed from the device's top level"));
        }
        checker.checked.roots += 1;
    }
    st.total = started.elapsed().as_secs_f64();
    let seconds = st.total;
    Ok(ShapeReport {
        devices: gpus.iter().map(|g| g.info().name.clone()).collect(),
        leaves,
        layers: shape.layers,
        range,
        ranges: ranges.len() as u64,
        device_busy_fraction: st.device.kernels / gpus.len() as f64 / seconds,
        predicted_seconds_per_32gib_sector: (leaves == 1 << 27 && shape.layers == 11)
            .then_some(seconds * BASE_TREES_32GIB as f64),
        device_memory_high_water_bytes: high_water,
        host_buffer_bytes: (in_flight as u64 + 1) * shape.layers as u64 * range * NODE as u64,
        in_flight,
        stages: st,
        checked: checker.checked,
        mismatches: checker.mismatches,
        root_c: hex::encode(fr_bytes(&root_c)),
        root_r: hex::encode(fr_bytes(&root_r)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> Gpu {
        let index = std::env::var("SEALER_GPU_DEVICE").ok().map_or(0, |s| s.parse().expect("an index"));
        Gpu::open(Some(index)).expect("an OpenCL device (pocl's CPU device: hack/host-deps.sh)")
    }

    /// The whole tree-c on the CPU from the generator: the root the sampled run must reach.
    fn cpu_root_c(seed: u64, leaves: u64, layers: usize) -> Fr {
        let leaves: Vec<Fr> = (0..leaves)
            .map(|n| {
                let col: Vec<Fr> = (1..=layers).map(|l| fr(&label(seed, l, n))).collect();
                if layers == 2 {
                    poseidon2(col[0], col[1])
                } else {
                    poseidon11(&col)
                }
            })
            .collect();
        root_of(leaves)
    }

    #[test]
    fn a_checked_shape_run_equals_the_cpu_and_its_sampler_catches_a_spoiled_node() {
        let g = [gpu()];
        // Ranges of 2^14 nodes: the device computes the leaves and one level above them.
        let mut shape =
            Shape { leaves_log2: 15, layers: 2, samples: 1 << 20, range_log2: Some(14), spoil: None, seed: 5 };
        let r = run(&g, &shape).unwrap();
        assert!(r.mismatches.is_empty(), "{:?}", r.mismatches);
        assert_eq!((r.ranges, r.checked.columns, r.checked.roots), (2, 1 << 15, 2));
        assert_eq!(r.checked.tree_nodes, 2 * (1 << 12), "every node the device computed above the leaves, both trees");
        assert_eq!(r.root_c, hex::encode(fr_bytes(&cpu_root_c(5, 1 << 15, 2))));
        assert_eq!(r.root_r, hex::encode(fr_bytes(&root_of((0..1 << 15).map(|n| fr(&label(5, 2, n))).collect()))));
        // One label of layer 1 changed under the device: its column is caught, by name.
        shape.spoil = Some(300);
        let r = run(&g, &shape).unwrap();
        assert_eq!(r.mismatches, vec!["tree-c leaf 300: the device's column hash differs from neptune's".to_string()]);
    }

    #[test]
    fn labels_are_field_elements_and_depend_on_layer_and_node() {
        let a = label(1, 1, 7);
        assert!(a[31] < 0x40, "below 2^254");
        assert_ne!(a, label(1, 2, 7));
        assert_ne!(a, label(1, 1, 8));
        assert_ne!(a, label(2, 1, 7));
        assert_eq!(a, label(1, 1, 7));
    }
}
