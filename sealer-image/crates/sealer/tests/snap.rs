//! SnapDeals oracle tests: sectors sealed CC by the sealer are updated with random deal data
//! by `sealer_pc2::snap`; the updated replica, tree-r-last, tree-d, p_aux, t_aux and the
//! commitments must equal filecoin-proofs `encode_into` on the same inputs, and filecoin-proofs'
//! vanilla update proofs made from our files must verify.

mod common;

use rand::{Rng, SeedableRng};
use sealer_config::Pc2Engine;
use sealer_oracle as oracle;
use sealer_pc1::Pc1Options;
use sealer_pc2::engine::Engine;
use sealer_pc2::snap::{encode_sectors, SnapSector};
use sealer_slot::Tuning;

/// Seal `layouts.len()` CC sectors, then update sector i with pieces of the raw lengths
/// `layouts[i]`.
fn snap_case(sector_size: u64, proof_id: u64, seed: u64, layouts: &[&[usize]], engine: Pc2Engine) {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let n = layouts.len();
    let (cfg, _) = common::config(sector_size, proof_id, n, seed, work.path(), 1);
    let opts = Pc1Options { allow_portable_hash: true, tuning: Tuning::default(), ..Default::default() };
    sealer_pc1::run_pc1(&cfg, &opts).expect("pc1");
    let sealed = sealer_pc2::run_pc2(&cfg, false).expect("pc2");

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut sectors = Vec::new();
    for (i, lens) in layouts.iter().enumerate() {
        let raws: Vec<std::path::PathBuf> = lens
            .iter()
            .enumerate()
            .map(|(j, &len)| {
                let p = work.path().join(format!("piece-{i}-{j}"));
                let mut b = vec![0u8; len];
                rng.fill(&mut b[..]);
                std::fs::write(&p, b).unwrap();
                p
            })
            .collect();
        let refs: Vec<&std::path::Path> = raws.iter().map(|p| p.as_path()).collect();
        let staged = work.path().join(format!("staged-{i}"));
        let pieces = sealer_data::stage(sector_size, &refs, &staged).unwrap();
        let mut sector = cfg.sectors[i].clone();
        sector.data = Some(sealer_config::SectorData { path: staged, pieces: pieces.clone() });
        sector.comm_d = Some(sealer_data::pieces_comm_d(sector_size, &pieces).unwrap());
        let key = sealer_config::sector_paths(&cfg, sector.sector_id);
        let dir = work.path().join(format!("update-{i}"));
        sectors.push(SnapSector {
            sector,
            sector_key: key.sealed,
            sector_key_cache: key.cache,
            replica: dir.join("sealed"),
            cache: dir.join("cache"),
            comm_r_old: Some(hex::decode(&sealed[i].comm_r).unwrap().try_into().unwrap()),
        });
    }
    let engine = Engine::open(engine).expect("the engine's device");
    let audit = sealer_proofs::audit::Audit::new();
    let ours = encode_sectors(sector_size, &sectors, &engine, Some(&audit)).expect("snap encode");

    for (i, s) in sectors.iter().enumerate() {
        assert_eq!(ours[i].comm_r_old, sealed[i].comm_r, "comm_r_old of sector {i}");
        let theirs = work.path().join(format!("oracle-{i}"));
        let (or, oc) = (theirs.join("sealed"), theirs.join("cache"));
        let (cr, crl, cd) =
            oracle::snap_encode(&cfg, &s.sector, &s.sector_key, &s.sector_key_cache, &or, &oc).expect("encode_into");
        assert_eq!(ours[i].comm_r_new, hex::encode(cr), "comm_r_new of sector {i}");
        assert_eq!(ours[i].comm_r_last_new, hex::encode(crl), "comm_r_last_new of sector {i}");
        assert_eq!(ours[i].comm_d_new, hex::encode(cd), "comm_d_new of sector {i}");
        assert!(std::fs::read(&s.replica).unwrap() == std::fs::read(&or).unwrap(), "updated replica of sector {i}");
        for f in ["sc-02-data-tree-r-last.dat", "sc-02-data-tree-d.dat", "p_aux", "t_aux"] {
            let (a, b) = (std::fs::read(s.cache.join(f)).unwrap(), std::fs::read(oc.join(f)).unwrap());
            assert!(a == b, "{f} of sector {i} differs ({} vs {} bytes)", a.len(), b.len());
        }
        let hex32 = |h: &str| -> [u8; 32] { hex::decode(h).unwrap().try_into().unwrap() };
        let comms = (hex32(&ours[i].comm_r_old), cr, cd);
        assert!(
            oracle::snap_prove_and_verify(&cfg, comms, &s.sector_key, &s.sector_key_cache, &s.replica, &s.cache)
                .expect("update proofs"),
            "filecoin-proofs' update proofs on our files do not verify (sector {i})"
        );
    }

    // Data that does not hold its pieces is refused, naming the sector, before a replica is written.
    let mut bad = sectors[0].clone();
    bad.sector.comm_d = Some([7; 32]);
    bad.replica = work.path().join("bad/sealed");
    bad.cache = work.path().join("bad/cache");
    let e = encode_sectors(sector_size, &[bad.clone()], &engine, None).unwrap_err();
    assert_eq!(e.exit_code(), 7, "{e}");
    assert!(e.to_string().contains(&format!("sector {}", bad.sector.sector_id)), "{e}");
    assert!(!bad.replica.exists() && !work.path().join("bad/sealed.tmp").exists());
}

/// 2 KiB (h = 1): one piece filling the sector, and three pieces with alignment padding between them.
#[test]
fn snap_kib2_two_sectors_two_piece_layouts() {
    snap_case(2048, 5, 701, &[&[2032], &[100, 500, 200]], Pc2Engine::Cpu);
}

/// The GPU engine's tree-r-last (on OpenCL device 0), random inputs.
#[test]
fn snap_kib2_gpu_engine() {
    snap_case(2048, 5, common::random_seed("snap_kib2_gpu_engine"), &[&[2032], &[300, 700]], Pc2Engine::Gpu);
}

/// The GPU engine at 8 MiB, random inputs.
#[test]
fn snap_mib8_gpu_engine() {
    snap_case(8 << 20, 6, common::random_seed("snap_mib8_gpu_engine"), &[&[4000, 200_000]], Pc2Engine::Gpu);
}

/// 8 MiB (h = 10, 1024 rho values): one sector of three pieces with padding between them.
#[test]
fn snap_mib8_padded_pieces() {
    snap_case(8 << 20, 6, 702, &[&[1000, 300_000, 5000]], Pc2Engine::Cpu);
}
