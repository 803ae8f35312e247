//! Shared helpers of the oracle tests.
#![allow(dead_code)]

use filecoin_hashers::poseidon::PoseidonHasher;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sealer_config::{porep_id_for, BatchConfig};
use sealer_oracle as oracle;
use std::path::{Path, PathBuf};
use std::sync::Once;

static INIT: Once = Once::new();

/// Cache dir for the filecoin crates (parent cache files persist across runs under target/tmp).
pub fn init() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sealer-fil-cache");
    INIT.call_once(|| {
        std::env::remove_var("FIL_PROOFS_USE_MULTICORE_SDR");
        // Force our own dirs, whatever the environment says.
        for (k, sub) in [
            ("FIL_PROOFS_PARENT_CACHE", "parents"),
            ("FIL_PROOFS_PARAMETER_CACHE", "params"),
            ("FIL_PROOFS_CACHE_DIR", "cache"),
        ] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).unwrap();
            std::env::set_var(k, &p);
        }
        let _ = oracle::set_cache_env; // same variables
                                       // The GPU engine's cases run on OpenCL device 0 unless told otherwise: pocl's CPU
                                       // device on a machine without a GPU (hack/host-deps.sh installs it).
        if std::env::var_os("SEALER_GPU_DEVICE").is_none() {
            std::env::set_var("SEALER_GPU_DEVICE", "0");
        }
    });
    dir
}

/// A seed for a case on random inputs, printed so a failure can be replayed
/// (`SEALER_TEST_SEED=<n>`).
pub fn random_seed(case: &str) -> u64 {
    let seed = std::env::var("SEALER_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("{case}: seed {seed}");
    seed
}

/// Random CC batch config: random prover ids, sector ids and tickets from `seed`.
pub fn config(
    sector_size: u64,
    proof_id: u64,
    n: usize,
    seed: u64,
    work: &Path,
    devices: usize,
) -> (BatchConfig, serde_json::Value) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (api, features): (&str, Vec<&str>) = match proof_id {
        0..=4 => ("1.0.0", vec![]),
        5..=9 => ("1.1.0", vec![]),
        10..=14 => ("1.2.0", vec!["SyntheticPoRep"]),
        _ => ("1.2.0", vec!["NonInteractivePoRep"]),
    };
    let sectors: Vec<serde_json::Value> = (0..n)
        .map(|_| {
            let p: [u8; 32] = rng.gen();
            let t: [u8; 32] = rng.gen();
            serde_json::json!({"prover_id": hex::encode(p), "sector_id": rng.gen::<u64>() >> 1, "ticket": hex::encode(t)})
        })
        .collect();
    let paths: Vec<String> = (0..devices).map(|i| work.join(format!("dev{i}.img")).display().to_string()).collect();
    let v = serde_json::json!({
        "sector_size": sector_size,
        "porep_id": hex::encode(porep_id_for(proof_id)),
        "api_version": api,
        "features": features,
        "sectors": sectors,
        "layers": {"paths": paths, "slot_offset": 3},
        "output_dir": work.join("out").display().to_string(),
        "progress_file": work.join("out/progress.json").display().to_string(),
    });
    (BatchConfig::from_json(&v.to_string()).unwrap(), v)
}

/// Compare the exported layers and identities of every sector with filecoin-proofs.
pub fn compare_with_oracle(
    cfg: &BatchConfig,
    replica_ids: &[[u8; 32]],
    comm_ds: &[[u8; 32]],
    export: &Path,
    work: &Path,
) {
    let layers = cfg.num_layers();
    assert_eq!(layers, oracle::filecoin_proofs_layers(cfg.sector_size), "layer count");
    for (i, s) in cfg.sectors.iter().enumerate() {
        let o = oracle::pc1_sector(cfg, s, work, true).expect("oracle seal");
        assert_eq!(comm_ds[i], o.comm_d, "comm_d of sector {i}");
        let rid = storage_proofs_porep::stacked::generate_replica_id::<PoseidonHasher, _>(
            &s.prover_id,
            s.sector_id,
            &s.ticket,
            o.comm_d,
            &cfg.porep_id,
        );
        let rid_bytes: [u8; 32] = rid.into();
        assert_eq!(replica_ids[i], rid_bytes, "replica_id of sector {i}");
        for l in 1..=layers {
            let ours =
                std::fs::read(export.join(s.sector_id.to_string()).join(format!("sc-02-data-layer-{l}.dat"))).unwrap();
            let theirs = &o.layers[l - 1];
            assert_eq!(ours.len(), theirs.len(), "layer {l} size, sector {i}");
            if ours != *theirs {
                let first = ours.chunks(32).zip(theirs.chunks(32)).position(|(a, b)| a != b).unwrap();
                panic!("layer {l} of sector {i} (id {}) differs first at node {first}", s.sector_id);
            }
        }
    }
}

const HUGEPAGES_1G: &str = "/sys/kernel/mm/hugepages/hugepages-1048576kB";

fn hugepages_1g(file: &str) -> Option<usize> {
    std::fs::read_to_string(format!("{HUGEPAGES_1G}/{file}")).ok()?.trim().parse().ok()
}

/// One more 1 GiB hugepage reserved in the kernel's pool for as long as it lives; the pool is
/// given back as it was on drop.
pub struct Hugepage1G {
    before: usize,
}

impl Hugepage1G {
    /// Reserve one (root only; None when the kernel cannot find 1 GiB of contiguous memory).
    pub fn reserve() -> Option<Hugepage1G> {
        let before = hugepages_1g("nr_hugepages")?;
        std::fs::write(format!("{HUGEPAGES_1G}/nr_hugepages"), (before + 1).to_string()).ok()?;
        let guard = Hugepage1G { before };
        (hugepages_1g("free_hugepages")? >= 1).then_some(guard)
    }
}

impl Drop for Hugepage1G {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("{HUGEPAGES_1G}/nr_hugepages"), self.before.to_string());
    }
}

/// `got` has exactly the keys of example `i` of the operator's results contract
/// (contracts/sealer-results.json, which the operator's tests read): at the top, in the first
/// sector, and in `cpus` / `buffers` / `timings` where the example has them.
pub fn assert_results_contract(i: usize, got: &serde_json::Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/sealer-results.json");
    let contract: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let want = &contract["examples"][i];
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
        k.sort();
        k
    };
    for (what, g, w) in [
        ("results", got, want),
        ("sectors[0]", &got["sectors"][0], &want["sectors"][0]),
        ("cpus", &got["cpus"], &want["cpus"]),
        ("buffers", &got["buffers"], &want["buffers"]),
        ("timings", &got["timings"], &want["timings"]),
    ] {
        assert_eq!(keys(g), keys(w), "{what} of {got}\nagainst example {i} of {}", path.display());
    }
}
