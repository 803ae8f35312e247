//! Oracle tests: the sealer's replica_id, comm_d and every layer of every sector, for random
//! inputs, must equal crates.io filecoin-proofs `seal_pre_commit_phase1`.
//!
//! Sizes: 2 KiB (every batch size 1/2/8/32 for API 1.0, 1.1 and 1.2+SyntheticPoRep) and
//! 8 MiB (a few batches, including a small node cache so far parents come from storage).
//! 512 MiB: `cargo test --release -- --ignored` or `SEALER_SLOW_TESTS=1`.

mod common;

use sealer_pc1::Pc1Options;
use sealer_slot::Tuning;

/// Seal a random batch with the sealer and compare every layer with filecoin-proofs. `layout`:
/// the engine's threads, or None for the layout computed for this machine.
#[allow(clippy::too_many_arguments)]
fn run_case(
    sector_size: u64,
    proof_id: u64,
    n: usize,
    seed: u64,
    devices: usize,
    tuning: Tuning,
    portable: bool,
    layout: Option<sealer_config::Layout>,
) -> sealer_pc1::Pc1Report {
    common::init();
    // Large cases keep their layers in tmpfs when there is one: this checks correctness, and
    // a virtio disk at ~140k random reads/s would make layer 2 alone take ~15 minutes.
    let shm = std::path::Path::new("/dev/shm");
    let work = if sector_size > (8 << 20) && shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let (mut cfg, _) = common::config(sector_size, proof_id, n, seed, work.path(), devices);
    if layout.is_some() {
        cfg.layout = layout;
    }
    let opts = Pc1Options {
        allow_portable_hash: true,
        force_portable_hash: portable,
        tuning,
        progress_bar: false,
        ..Default::default()
    };
    let rep = sealer_pc1::run_pc1(&cfg, &opts).expect("sealer pc1");
    assert_eq!(rep.first_layer, 1);
    let export = work.path().join("export");
    assert_eq!(sealer_slot::export_layers(&cfg, &export).unwrap(), cfg.num_layers());
    let v = sealer_pc1::verify_nodes(&cfg, 50, seed).unwrap();
    assert!(v.mismatches.is_empty(), "verify: {:?}", v.mismatches);
    common::compare_with_oracle(&cfg, &rep.replica_ids, &rep.comm_ds, &export, work.path());
    // progress file says done
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cfg.progress_file.as_ref().unwrap()).unwrap()).unwrap();
    assert_eq!(p["state"], "done");
    assert_eq!(p["percent"].as_f64().unwrap(), 100.0);
    rep
}

const KIB2: u64 = 2048;
const MIB8: u64 = 8 << 20;

macro_rules! cases_2k {
    ($($name:ident: $proof:expr, $n:expr, $seed:expr;)*) => {$(
        #[test]
        fn $name() {
            run_case(KIB2, $proof, $n, $seed, 2, Tuning::default(), false, None);
        }
    )*};
}

cases_2k! {
    kib2_v1_0_n1: 0, 1, 101;
    kib2_v1_0_n2: 0, 2, 102;
    kib2_v1_0_n8: 0, 8, 103;
    kib2_v1_0_n32: 0, 32, 104;
    kib2_v1_1_n1: 5, 1, 111;
    kib2_v1_1_n2: 5, 2, 112;
    kib2_v1_1_n8: 5, 8, 113;
    kib2_v1_1_n32: 5, 32, 114;
    kib2_synth_n1: 10, 1, 121;
    kib2_synth_n2: 10, 2, 122;
    kib2_synth_n8: 10, 8, 123;
    kib2_synth_n32: 10, 32, 124;
}

#[test]
fn kib2_v1_1_n128_one_device() {
    run_case(KIB2, 5, 128, 131, 1, Tuning::default(), false, None);
}

#[test]
fn kib2_portable_kernel_matches() {
    run_case(KIB2, 5, 2, 141, 1, Tuning::default(), true, None);
}

#[test]
fn mib8_v1_1_n1_whole_layer_cache() {
    run_case(MIB8, 6, 1, 201, 2, Tuning::default(), false, None);
}

#[test]
fn mib8_v1_0_n2_small_cache_far_parents_from_storage() {
    run_case(
        MIB8,
        1,
        2,
        202,
        3,
        Tuning { chunk_nodes: 256, ring_bytes: 256 << 10, depth: 3, resident_bytes: 0 },
        false,
        None,
    );
}

/// A small node cache with the first half of the previous layer resident (32 of its 64 MiB):
/// expander parents come from memory below the half and from storage above it.
#[test]
fn mib8_synth_n8_small_cache_half_layer_resident() {
    let t = Tuning { chunk_nodes: 512, ring_bytes: 4 << 20, depth: 4, resident_bytes: 32 << 20 };
    let rep = run_case(MIB8, 11, 8, 203, 2, t, false, None);
    // Layer 2 read half of layer 1 (2^17 nodes, 16 a page) sequentially.
    assert_eq!((rep.geometry.resident, rep.resident_pages_read), (1 << 17, (1 << 17) / 16));
    // The per-layer figures add up to the run's, and put the resident fill and the expander
    // reads on layer 2.
    let l = &rep.layer_stats;
    assert_eq!(l.iter().map(|l| l.layer).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(l.iter().map(|l| l.pages_read).sum::<u64>(), rep.pages_read);
    assert_eq!(l.iter().map(|l| l.labels).sum::<u64>(), rep.labels);
    assert_eq!((l[0].resident_pages_read, l[1].resident_pages_read), (0, (1 << 17) / 16));
    assert!(l[1].pages_read > l[0].pages_read, "layer 2 reads expander parents: {l:?}");
}

/// A coordinator on a CPU of its own prefetches its hashers' parents (node cache, resident part
/// and read pages all in play: small cache, half the previous layer resident); the labels must
/// not depend on it.
#[test]
fn mib8_v1_1_n4_coordinator_prefetching() {
    use sealer_config::{Coordinator, Hasher, Layout};
    let mut l = Layout::standalone(4, &[vec![0, 1]]);
    l.coordinators =
        vec![Coordinator { cpu: 0, hashers: vec![Hasher { cpu: 1, sectors: 3 }, Hasher { cpu: 1, sectors: 1 }] }];
    assert!(sealer_pc1::engine::ThreadPlan::from_layout(&l, false).groups[0].prefetches());
    let shared = Layout::standalone(4, &[vec![0, 1]]);
    assert!(!sealer_pc1::engine::ThreadPlan::from_layout(&shared, false).groups[0].prefetches());
    let t = Tuning { chunk_nodes: 512, ring_bytes: 2 << 20, depth: 4, resident_bytes: 16 << 20 };
    run_case(MIB8, 6, 4, 205, 2, t, false, Some(l));
}

/// The previous layer resident but not kept whole (no ring budget for two layers).
#[test]
fn kib2_v1_1_n8_resident_previous_layer() {
    let rep = run_case(
        KIB2,
        5,
        8,
        204,
        2,
        Tuning { ring_bytes: 0, resident_bytes: 32 * 256, ..Tuning::default() },
        false,
        None,
    );
    assert!(!rep.geometry.keep_prev_layer);
    assert_eq!((rep.geometry.resident, rep.resident_pages_read), (32, 2));
}

fn slow_512() {
    run_case(512 << 20, 7, 2, 301, 2, Tuning::default(), false, None);
}

/// 512 MiB, two sectors (about 10+ minutes on 2 cores: the oracle takes ~5 min per sector).
#[test]
#[ignore]
fn mib512_v1_1_n2() {
    slow_512();
}

/// Same as `mib512_v1_1_n2`, run without `--ignored` when `SEALER_SLOW_TESTS=1`.
#[test]
fn mib512_when_slow_tests_enabled() {
    if std::env::var("SEALER_SLOW_TESTS").as_deref() == Ok("1") {
        slow_512();
    }
}
