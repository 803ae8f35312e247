//! PC2 oracle tests: comm_c, comm_r_last, comm_r, p_aux, t_aux, tree-c, tree-r-last and the
//! replica must equal crates.io filecoin-proofs seal_pre_commit_phase2; and filecoin-proofs
//! C1 (whose sanity check verifies every vanilla proof) must accept our output directory.

mod common;

use rand::{Rng, SeedableRng};
use sealer::oracle;
use sealer_pc1::{Pc1Options, Tuning};

fn pc2_case(sector_size: u64, proof_id: u64, n: usize, seed: u64, oracle_sectors: usize, c1: bool) {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, _) = common::config(sector_size, proof_id, n, seed, work.path(), 2);
    let opts = Pc1Options { allow_portable_hash: true, tuning: Tuning::default(), ..Default::default() };
    sealer_pc1::run_pc1(&cfg, &opts).expect("pc1");
    let res = sealer_pc2::run_pc2(&cfg, c1).expect("pc2");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cfg.output_dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(summary["sectors"].as_array().unwrap().len(), n);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // compare a spread of sectors with the oracle (all when oracle_sectors >= n)
    let step = (n / oracle_sectors.min(n)).max(1);
    for i in (0..n).step_by(step) {
        let s = &cfg.sectors[i];
        let o = oracle::precommit_sector(&cfg, s, work.path()).expect("oracle");
        assert_eq!(res[i].comm_r, hex::encode(o.comm_r), "comm_r of sector {i}");
        assert_eq!(res[i].comm_d, hex::encode(o.comm_d), "comm_d of sector {i}");
        let ours = sealer_pc2::sector_dir(&cfg, s.sector_id);
        let oc = &o.cache;
        let paux = std::fs::read(ours.join("cache/p_aux")).unwrap();
        assert_eq!(paux, std::fs::read(oc.join("p_aux")).unwrap(), "p_aux of sector {i}");
        assert_eq!(hex::encode(&paux[..32]), res[i].comm_c);
        assert_eq!(hex::encode(&paux[32..]), res[i].comm_r_last);
        for f in ["sc-02-data-tree-r-last.dat", "sc-02-data-tree-c.dat", "sc-02-data-tree-d.dat"] {
            let a = std::fs::read(ours.join("cache").join(f)).unwrap();
            let b = std::fs::read(oc.join(f)).unwrap();
            assert!(a == b, "{f} of sector {i} differs ({} vs {} bytes)", a.len(), b.len());
        }
        assert!(
            std::fs::read(ours.join("sealed")).unwrap() == std::fs::read(&o.sealed).unwrap(),
            "replica of sector {i}"
        );
        let oabs = std::fs::canonicalize(oc).unwrap();
        assert_eq!(
            sealer_pc2::t_aux_bytes(&oabs, cfg.nodes(), cfg.num_layers(), cfg.sector_size),
            std::fs::read(oc.join("t_aux")).unwrap(),
            "t_aux format"
        );
        if c1 {
            let seed_bytes: [u8; 32] = rng.gen();
            let mut cr = [0u8; 32];
            cr.copy_from_slice(&hex::decode(&res[i].comm_r).unwrap());
            let mut cd = [0u8; 32];
            cd.copy_from_slice(&hex::decode(&res[i].comm_d).unwrap());
            let parts = oracle::commit_phase1(&cfg, s, &ours.join("cache"), &ours.join("sealed"), seed_bytes, cr, cd)
                .expect("C1 on sealfleet outputs (vanilla proofs verified by filecoin-proofs' sanity check)");
            assert!(parts >= 1);
        }
    }
}

#[test]
fn pc2_kib2_v1_1_n1_with_c1() {
    pc2_case(2048, 5, 1, 601, 1, true);
}

#[test]
fn pc2_kib2_synth_n4() {
    pc2_case(2048, 10, 4, 602, 4, false);
}

#[test]
fn pc2_kib2_v1_1_n16_with_c1() {
    pc2_case(2048, 5, 16, 603, 16, true);
}

#[test]
fn pc2_mib8_v1_1_n4_with_c1() {
    pc2_case(8 << 20, 6, 4, 604, 2, true);
}
