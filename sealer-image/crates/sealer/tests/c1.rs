//! V1_1 C1 from the slot: after PC2 without layer files, `c1::from_slot` writes each seeded
//! sector's C1 output from the labels in the slot. It must be byte-identical to
//! filecoin-proofs-api's `seal_commit_phase1` on filecoin-proofs' own sealed sector (all its
//! layer files present), with the same ticket and a random seed, and leave no layer files.

mod common;

use filecoin_proofs_api::seal::{seal_commit_phase1, SealPreCommitPhase2Output};
use rand::{Rng, SeedableRng};
use sealer_oracle as oracle;
use sealer_pc1::Pc1Options;
use sealer_proofs::c1;
use sealer_slot::Tuning;

fn c1_from_slot_case(sector_size: u64, proof_id: u64, n: usize, seed: u64, seeded: &[usize]) {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, _) = common::config(sector_size, proof_id, n, seed, work.path(), 2);
    let opts = Pc1Options { allow_portable_hash: true, tuning: Tuning::default(), ..Default::default() };
    sealer_pc1::run_pc1(&cfg, &opts).expect("pc1");
    let res = sealer_pc2::run_pc2(&cfg, false).expect("pc2 without layer files");
    let hex32 = |h: &str| -> [u8; 32] { hex::decode(h).unwrap().try_into().unwrap() };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let sectors: Vec<c1::SeededSector> = seeded
        .iter()
        .map(|&i| c1::SeededSector {
            index: i,
            seed: rng.gen(),
            comm_r: hex32(&res[i].comm_r),
            comm_d: hex32(&res[i].comm_d),
        })
        .collect();
    let mut reader = sealer_slot::LayerReader::open(&cfg).unwrap();
    let parents = sealer_slot::open_parents(&cfg).unwrap();
    let out = c1::from_slot(&cfg, &sectors, &mut reader, &parents).expect("C1 from the slot");
    assert_eq!(out.len(), seeded.len());

    for (s, (id, path)) in sectors.iter().zip(&out) {
        let spec = &cfg.sectors[s.index];
        assert_eq!(*id, spec.sector_id);
        let ours = std::fs::read(path).unwrap();
        let o = oracle::precommit_sector(&cfg, spec, work.path()).expect("oracle");
        assert_eq!((o.comm_r, o.comm_d), (s.comm_r, s.comm_d));
        let pre = SealPreCommitPhase2Output {
            registered_proof: serde_json::from_value(cfg.proof_name().into()).unwrap(),
            comm_r: o.comm_r,
            comm_d: o.comm_d,
        };
        let theirs = seal_commit_phase1(
            &o.cache,
            &o.sealed,
            spec.prover_id,
            spec.sector_id.into(),
            spec.ticket,
            s.seed,
            pre,
            &[],
        )
        .expect("filecoin-proofs C1");
        assert!(
            ours == serde_json::to_vec(&theirs).unwrap(),
            "C1 output of sector {} differs from filecoin-proofs'",
            spec.sector_id
        );
        let cache = sealer_config::sector_paths(&cfg, spec.sector_id).cache;
        assert!(!cache.join("sc-02-data-layer-1.dat").exists(), "layer files left after C1");
    }
    // Unseeded sectors get nothing; a second run finds the seeded ones done, and removes the
    // sparse layer files a crash between the output and their removal would leave.
    let stale =
        sealer_config::sector_paths(&cfg, cfg.sectors[seeded[0]].sector_id).cache.join("sc-02-data-layer-1.dat");
    std::fs::write(&stale, b"left by a crash").unwrap();
    for (i, s) in cfg.sectors.iter().enumerate() {
        let written = sealer_config::sector_paths(&cfg, s.sector_id).cache.join(c1::C1_OUTPUT_FILE).exists();
        assert_eq!(written, seeded.contains(&i), "sector {i}");
    }
    assert_eq!(c1::from_slot(&cfg, &sectors, &mut reader, &parents).unwrap(), out);
    assert!(!stale.exists(), "a finished sector's leftover layer file was kept");
}

#[test]
fn c1_from_slot_kib2_n4_two_seeded() {
    c1_from_slot_case(2048, 5, 4, 801, &[0, 3]);
}

#[test]
fn c1_from_slot_mib8_n2() {
    c1_from_slot_case(8 << 20, 6, 2, 802, &[0, 1]);
}
