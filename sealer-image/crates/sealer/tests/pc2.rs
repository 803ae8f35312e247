//! PC2 oracle tests: comm_c, comm_r_last, comm_r, p_aux, t_aux, tree-c, tree-r-last and the
//! replica must equal crates.io filecoin-proofs seal_pre_commit_phase2; and filecoin-proofs
//! C1 (whose sanity check verifies every vanilla proof) must accept our output directory.

mod common;

use rand::{Rng, SeedableRng};
use sealer_config::Pc2Engine;
use sealer_oracle as oracle;
use sealer_pc1::Pc1Options;
use sealer_slot::Tuning;

fn pc2_case(sector_size: u64, proof_id: u64, n: usize, seed: u64, oracle_sectors: usize, c1: bool) {
    pc2_case_with(sector_size, proof_id, n, seed, oracle_sectors, c1, false, &[], Pc2Engine::Cpu, 2)
}

/// With `lotus`, the batch is one miner's and writes a lotus/Curio storage path. `data[i]`
/// lists the raw piece lengths of sector i, random bytes staged by filecoin-proofs' add_piece
/// (no entry or an empty one: a CC sector).
#[allow(clippy::too_many_arguments)]
fn pc2_case_with(
    sector_size: u64,
    proof_id: u64,
    n: usize,
    seed: u64,
    oracle_sectors: usize,
    c1: bool,
    lotus: bool,
    data: &[&[usize]],
    engine: Pc2Engine,
    devices: usize,
) {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (mut cfg, mut json) = common::config(sector_size, proof_id, n, seed, work.path(), devices);
    if lotus {
        for s in json["sectors"].as_array_mut().unwrap() {
            s["prover_id"] = hex::encode(sealer_config::prover_id_of(1000)).into();
        }
        json["lotus"] = serde_json::json!({"miner": 1000, "storage_id": "0f1e2d3c-4b5a-4697-8877-665544332211"});
    }
    let mut data_rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0xda7a);
    for (i, lens) in data.iter().enumerate().filter(|(_, l)| !l.is_empty()) {
        let raws: Vec<std::path::PathBuf> = lens
            .iter()
            .enumerate()
            .map(|(j, &len)| {
                let p = work.path().join(format!("piece-{i}-{j}"));
                let mut b = vec![0u8; len];
                data_rng.fill(&mut b[..]);
                std::fs::write(&p, b).unwrap();
                p
            })
            .collect();
        let refs: Vec<&std::path::Path> = raws.iter().map(|p| p.as_path()).collect();
        let staged = work.path().join(format!("staged-{i}"));
        let pieces = sealer_data::stage(sector_size, &refs, &staged).expect("staging");
        json["sectors"][i]["data"] = serde_json::json!({
            "path": staged.display().to_string(),
            "pieces": pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>(),
        });
    }
    json["pc2_engine"] = engine.as_str().into();
    if lotus || !data.is_empty() || engine != Pc2Engine::Cpu {
        cfg = sealer_config::BatchConfig::from_json(&json.to_string()).unwrap();
        sealer_data::resolve_comm_ds(&mut cfg).unwrap();
        assert_eq!(sealer_data::check_data(&cfg).unwrap(), data.iter().filter(|l| !l.is_empty()).count());
    }
    let opts = Pc1Options { allow_portable_hash: true, tuning: Tuning::default(), ..Default::default() };
    sealer_pc1::run_pc1(&cfg, &opts).expect("pc1");
    let res = sealer_pc2::run_pc2(&cfg, c1).expect("pc2");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cfg.output_dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(summary["sectors"].as_array().unwrap().len(), n);
    if lotus {
        let store: serde_json::Value =
            serde_json::from_slice(&std::fs::read(cfg.output_dir.join("sectorstore.json")).unwrap()).unwrap();
        assert_eq!(store["ID"], "0f1e2d3c-4b5a-4697-8877-665544332211");
        assert_eq!((store["CanSeal"].as_bool(), store["CanStore"].as_bool()), (Some(false), Some(true)));
        let leftovers: Vec<_> = std::fs::read_dir(cfg.output_dir.join("sealed"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|f| !f.starts_with("s-t01000-") || f.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "sealed/ holds {leftovers:?}");
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // compare a spread of sectors with the oracle (all when oracle_sectors >= n)
    let step = (n / oracle_sectors.min(n)).max(1);
    for i in (0..n).step_by(step) {
        let s = &cfg.sectors[i];
        let o = oracle::precommit_sector(&cfg, s, work.path()).expect("oracle");
        assert_eq!(res[i].comm_r, hex::encode(o.comm_r), "comm_r of sector {i}");
        assert_eq!(res[i].comm_d, hex::encode(o.comm_d), "comm_d of sector {i}");
        if data.get(i).is_some_and(|l| !l.is_empty()) {
            assert_ne!(o.comm_d, sealer_hash::cc_comm_d(sector_size), "sector {i} holds data");
        }
        let ours = sealer_config::sector_paths(&cfg, s.sector_id);
        if lotus {
            let name = format!("s-t01000-{}", s.sector_id);
            assert_eq!(ours.sealed, cfg.output_dir.join("sealed").join(&name));
            assert_eq!(ours.cache, cfg.output_dir.join("cache").join(&name));
        }
        let oc = &o.cache;
        let paux = std::fs::read(ours.cache.join("p_aux")).unwrap();
        assert_eq!(paux, std::fs::read(oc.join("p_aux")).unwrap(), "p_aux of sector {i}");
        assert_eq!(hex::encode(&paux[..32]), res[i].comm_c);
        assert_eq!(hex::encode(&paux[32..]), res[i].comm_r_last);
        for f in ["sc-02-data-tree-r-last.dat", "sc-02-data-tree-c.dat", "sc-02-data-tree-d.dat"] {
            let a = std::fs::read(ours.cache.join(f)).unwrap();
            let b = std::fs::read(oc.join(f)).unwrap();
            assert!(a == b, "{f} of sector {i} differs ({} vs {} bytes)", a.len(), b.len());
        }
        assert!(std::fs::read(&ours.sealed).unwrap() == std::fs::read(&o.sealed).unwrap(), "replica of sector {i}");
        if c1 {
            // The operator books this many output bytes per sector (internal/placement's
            // golden); the files PC2 wrote (replica, trees, layers, p_aux, t_aux) must fit it,
            // with at most the 4 KiB it allows for p_aux and t_aux unused.
            let golden: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("../../../internal/placement/testdata/output-bytes.golden.json"),
                )
                .unwrap(),
            )
            .unwrap();
            let booked = golden[cfg.sector_size.to_string()].as_u64().unwrap();
            let mut written = std::fs::metadata(&ours.sealed).unwrap().len();
            for e in std::fs::read_dir(&ours.cache).unwrap() {
                written += e.unwrap().metadata().unwrap().len();
            }
            assert!(
                written <= booked && booked - written <= 4096,
                "sector {i}: wrote {written} bytes, booked {booked}"
            );
        }
        let oabs = std::fs::canonicalize(oc).unwrap();
        assert_eq!(
            sealer_pc2::t_aux_bytes(&oabs, cfg.nodes(), cfg.num_layers(), cfg.sector_size),
            std::fs::read(oc.join("t_aux")).unwrap(),
            "t_aux format"
        );
        if c1 && sealer_proofs::synth::enabled(&cfg) {
            // SyntheticPoRep: the sealer's streaming file equals filecoin-proofs' own
            // generate_synth_proofs on its outputs. Odd sectors read their labels from the slot
            // (their layer files removed first), even ones from the layer files.
            let hex32 = |h: &str| -> [u8; 32] { hex::decode(h).unwrap().try_into().unwrap() };
            let (cr, cd) = (hex32(&res[i].comm_r), hex32(&res[i].comm_d));
            if i % 2 == 1 {
                for l in sealer_proofs::synth::layer_paths(&ours.cache, cfg.num_layers()) {
                    std::fs::remove_file(l).unwrap();
                }
            }
            sealer_proofs::synth::write_sector(&cfg, i, &ours.cache, &ours.sealed, cr, cd).expect("synthetic proofs");
            sealer_proofs::synth::write_with_filecoin_proofs(&cfg, i, oc, &o.sealed, cr, cd)
                .expect("filecoin-proofs' synthetic proofs");
            let f = sealer_proofs::synth::SYNTH_PROOFS_FILE;
            let (a, b) = (std::fs::read(ours.cache.join(f)).unwrap(), std::fs::read(oc.join(f)).unwrap());
            assert!(!a.is_empty() && a == b, "{f} of sector {i} differs ({} vs {} bytes)", a.len(), b.len());
            assert!(!ours.cache.join("sc-02-data-layer-1.dat").exists(), "layer files left after synthetic proofs");
            for p in sealer_proofs::synth::stream::partial_paths(&ours.cache.join(f)) {
                assert!(!p.exists(), "{} left after synthetic proofs", p.display());
            }
            // A second call (a resumed batch) finds it done.
            sealer_proofs::synth::write_sector(&cfg, i, &ours.cache, &ours.sealed, cr, cd).unwrap();
            if i == 0 {
                synth_resumes(&cfg, i, &ours, cr, cd, &b, &work.path().join("resumed.dat"));
            }
            // filecoin-proofs' C1 reads the stored proofs: the same output on our file as on its own.
            let pieces = match &s.data {
                Some(d) => sealer_data::piece_infos(cfg.sector_size, &d.pieces).unwrap(),
                None => vec![],
            };
            let seed_bytes: [u8; 32] = rng.gen();
            let c1_on = |cache: &std::path::Path, sealed: &std::path::Path| {
                let registered_proof = serde_json::from_value(cfg.proof_name().into()).unwrap();
                let pre =
                    filecoin_proofs_api::seal::SealPreCommitPhase2Output { registered_proof, comm_r: cr, comm_d: cd };
                let out = filecoin_proofs_api::seal::seal_commit_phase1(
                    cache,
                    sealed,
                    s.prover_id,
                    s.sector_id.into(),
                    s.ticket,
                    seed_bytes,
                    pre,
                    &pieces,
                )
                .expect("filecoin-proofs-api C1 of a SyntheticPoRep sector");
                serde_json::to_vec(&out).unwrap()
            };
            let theirs = c1_on(oc, &o.sealed);
            assert!(c1_on(&ours.cache, &ours.sealed) == theirs, "C1 of sector {i} differs on our file");
            // The sealer's own C1 on request (`sealer c1` of a SyntheticPoRep batch) writes the
            // same bytes, with no layer file and no slot.
            let seeded = sealer_proofs::c1::SeededSector { index: i, seed: seed_bytes, comm_r: cr, comm_d: cd };
            let written = sealer_proofs::c1::from_synthetic_proofs(&cfg, std::slice::from_ref(&seeded))
                .expect("C1 from synthetic proofs");
            assert!(
                std::fs::read(&written[0].1).unwrap() == theirs,
                "sealer C1 of synthetic sector {i} differs from filecoin-proofs-api's"
            );
        }
        if c1 && sealer_proofs::c1::enabled(&cfg) {
            // NI-PoRep: our C1 output (made on our files) equals filecoin-proofs-api's
            // seal_commit_phase1 on its own files, byte for byte, and the layers are gone.
            let hex32 = |h: &str| -> [u8; 32] { hex::decode(h).unwrap().try_into().unwrap() };
            let (cr, cd) = (hex32(&res[i].comm_r), hex32(&res[i].comm_d));
            let pieces = match &s.data {
                Some(d) => sealer_data::piece_infos(cfg.sector_size, &d.pieces).unwrap(),
                None => vec![],
            };
            let registered_proof = serde_json::from_value(cfg.proof_name().into()).unwrap();
            let pre = filecoin_proofs_api::seal::SealPreCommitPhase2Output { registered_proof, comm_r: cr, comm_d: cd };
            let api = filecoin_proofs_api::seal::seal_commit_phase1(
                oc,
                &o.sealed,
                s.prover_id,
                s.sector_id.into(),
                s.ticket,
                [0; 32],
                pre,
                &pieces,
            )
            .expect("filecoin-proofs-api C1 on its own outputs");
            sealer_proofs::c1::write_sector(&cfg, i, &ours.cache, &ours.sealed, cr, cd).expect("C1 on our outputs");
            let f = sealer_proofs::c1::C1_OUTPUT_FILE;
            assert!(
                std::fs::read(ours.cache.join(f)).unwrap() == serde_json::to_vec(&api).unwrap(),
                "{f} of sector {i} differs from filecoin-proofs-api's"
            );
            sealer_proofs::c1::write_sector(&cfg, i, oc, &o.sealed, cr, cd).expect("C1 on filecoin-proofs' outputs");
            let (a, b) = (std::fs::read(ours.cache.join(f)).unwrap(), std::fs::read(oc.join(f)).unwrap());
            assert!(!a.is_empty() && a == b, "{f} of sector {i} differs ({} vs {} bytes)", a.len(), b.len());
            let parsed: filecoin_proofs_api::seal::SealCommitPhase1Output = serde_json::from_slice(&a).unwrap();
            assert_eq!((parsed.comm_r, parsed.comm_d), (cr, cd));
            assert_eq!(serde_json::to_value(parsed.registered_proof).unwrap(), cfg.proof_name());
            assert!(!ours.cache.join("sc-02-data-layer-1.dat").exists(), "layer files left after C1");
            sealer_proofs::c1::write_sector(&cfg, i, &ours.cache, &ours.sealed, cr, cd).unwrap();
        }
        if c1 && !sealer_proofs::c1::enabled(&cfg) {
            let seed_bytes: [u8; 32] = rng.gen();
            let mut cr = [0u8; 32];
            cr.copy_from_slice(&hex::decode(&res[i].comm_r).unwrap());
            let mut cd = [0u8; 32];
            cd.copy_from_slice(&hex::decode(&res[i].comm_d).unwrap());
            let parts = oracle::commit_phase1(&cfg, s, &ours.cache, &ours.sealed, seed_bytes, cr, cd)
                .expect("C1 on sealfleet outputs (vanilla proofs verified by filecoin-proofs' sanity check)");
            assert!(parts >= 1);
        }
    }
}

/// A writer stopped after 3 chunks of 10 challenges leaves `<out>.partial` and its checkpoint,
/// never `out`; torn bytes past the checkpoint (a write the machine lost) are dropped, and the
/// next run keeps the 30 records and ends with `want`'s bytes.
fn synth_resumes(
    cfg: &sealer_config::BatchConfig,
    i: usize,
    paths: &sealer_config::SectorPaths,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    want: &[u8],
    out: &std::path::Path,
) {
    use sealer_proofs::synth::{labels::SlotLabels, stream};
    let s = &cfg.sectors[i];
    let parents = sealer_slot::open_parents(cfg).unwrap();
    let input = stream::SectorInput {
        cache: &paths.cache,
        sealed: &paths.sealed,
        sector_size: cfg.sector_size,
        layers: cfg.num_layers(),
        replica_id: sealer_hash::replica_id(&s.prover_id, s.sector_id, &s.ticket, &comm_d, &cfg.porep_id),
        comm_r,
        comm_d,
        parents: &parents,
    };
    let mut reader = sealer_slot::LayerReader::open(cfg).unwrap();
    let mut chunks = 0;
    let mut stop = |_: usize, _: usize| {
        chunks += 1;
        if chunks == 3 {
            anyhow::bail!("stopped")
        }
        Ok(())
    };
    let e = stream::write_in_chunks(&input, &mut SlotLabels::new(&mut reader, i, cfg.num_layers()), out, 10, &mut stop);
    assert!(e.is_err() && !out.exists(), "a stopped writer named its file");
    let [partial, checkpoint] = stream::partial_paths(out);
    assert!(checkpoint.exists());
    let mut torn = std::fs::OpenOptions::new().append(true).open(&partial).unwrap();
    std::io::Write::write_all(&mut torn, &[0xee; 5000]).unwrap();
    let w = stream::write_in_chunks(
        &input,
        &mut SlotLabels::new(&mut reader, i, cfg.num_layers()),
        out,
        10,
        &mut |_, _| Ok(()),
    )
    .unwrap();
    assert_eq!((w.resumed, w.bytes), (30, want.len() as u64));
    assert!(std::fs::read(out).unwrap() == want, "the resumed file differs from filecoin-proofs'");
    assert!(!partial.exists() && !checkpoint.exists());
}

#[test]
fn pc2_kib2_v1_1_n1_with_c1() {
    pc2_case(2048, 5, 1, 601, 1, true);
}

#[test]
fn pc2_kib2_v1_1_n4_lotus_storage_path_with_c1() {
    pc2_case_with(2048, 5, 4, 605, 4, true, true, &[], Pc2Engine::Cpu, 2);
}

#[test]
fn pc2_kib2_synth_n4() {
    pc2_case(2048, 10, 4, 602, 4, false);
}

/// SyntheticPoRep: vanilla proofs bit-identical to filecoin-proofs', layers gone, and
/// filecoin-proofs' C1 (which verifies the stored proofs) accepts the output directory.
#[test]
fn pc2_kib2_synth_n2_proofs_and_c1() {
    pc2_case(2048, 10, 2, 606, 2, true);
}

/// 8 MiB: 2^18 synthetic challenges per sector (every node), minutes of proving on a 2-core
/// machine for ours and filecoin-proofs' file each; in the slow tier with 512 MiB.
#[test]
#[ignore]
fn pc2_mib8_synth_n2_proofs_and_c1() {
    pc2_case(8 << 20, 11, 2, 607, 1, true);
}

/// 8 MiB SyntheticPoRep as the operator runs it: no layer files, every label read from the slot.
/// filecoin-proofs' own file takes 43 min and 18 GB per 8 MiB sector here (the whole-file
/// comparison is the ignored case above and `sealer bench synth`); instead its C1, which selects
/// records by the seed and verifies each against comm_r (any wrong byte fails it), runs on our
/// file for many random seeds, and the file has the size the operator books.
#[test]
fn pc2_mib8_synth_from_the_slot_passes_filecoin_proofs_c1() {
    use filecoin_proofs_api::seal::{seal_commit_phase1, SealPreCommitPhase2Output};
    const SEEDS: usize = 24;
    common::init();
    let seed = common::random_seed("pc2_mib8_synth_from_the_slot_passes_filecoin_proofs_c1");
    let work = tempfile::tempdir().unwrap();
    let (cfg, _) = common::config(8 << 20, 11, 2, seed, work.path(), 2);
    let opts = Pc1Options { allow_portable_hash: true, tuning: Tuning::default(), ..Default::default() };
    sealer_pc1::run_pc1(&cfg, &opts).expect("pc1");
    let res = sealer_pc2::run_pc2(&cfg, false).expect("pc2");
    let want = sealer_proofs::synth::cost(cfg.sector_size).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut records = std::collections::HashSet::new();
    for (i, s) in cfg.sectors.iter().enumerate() {
        let paths = sealer_config::sector_paths(&cfg, s.sector_id);
        assert!(!paths.cache.join("sc-02-data-layer-1.dat").exists(), "PC2 kept layer files");
        let hex32 = |h: &str| -> [u8; 32] { hex::decode(h).unwrap().try_into().unwrap() };
        let (cr, cd) = (hex32(&res[i].comm_r), hex32(&res[i].comm_d));
        sealer_proofs::synth::write_sector(&cfg, i, &paths.cache, &paths.sealed, cr, cd).expect("synthetic proofs");
        let file = paths.cache.join(sealer_proofs::synth::SYNTH_PROOFS_FILE);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), want.file_bytes, "size of sector {i}'s file");
        let registered_proof: filecoin_proofs_api::RegisteredSealProof =
            serde_json::from_value(cfg.proof_name().into()).unwrap();
        for _ in 0..SEEDS {
            let seed_bytes: [u8; 32] = rng.gen();
            let pre = SealPreCommitPhase2Output { registered_proof, comm_r: cr, comm_d: cd };
            let out = seal_commit_phase1(
                &paths.cache,
                &paths.sealed,
                s.prover_id,
                s.sector_id.into(),
                s.ticket,
                seed_bytes,
                pre,
                &[],
            )
            .unwrap_or_else(|e| {
                panic!("filecoin-proofs C1 refused sector {i}'s file (seed {}): {e:?}", hex::encode(seed_bytes))
            });
            // which records it took: each selected proof's challenged node
            let v = serde_json::to_value(&out).unwrap();
            records.extend(collect_challenges(&v["vanilla_proofs"]).into_iter().map(|n| (i, n)));
        }
        if i == 0 {
            c1_refuses_a_flipped_record(&cfg, i, &paths, cr, cd, &file, rng.gen());
        }
        std::fs::remove_file(&file).unwrap();
    }
    eprintln!("filecoin-proofs verified {} distinct records of our files", records.len());
    assert!(records.len() >= SEEDS, "C1 checked only {} records", records.len());
}

/// The check above can fail: one byte flipped in the middle of a record C1 selects for `seed`
/// (found by storage-proofs' own index derivation) makes filecoin-proofs' C1 refuse the file;
/// restored, it is accepted again.
fn c1_refuses_a_flipped_record(
    cfg: &sealer_config::BatchConfig,
    i: usize,
    paths: &sealer_config::SectorPaths,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    file: &std::path::Path,
    seed: [u8; 32],
) {
    use filecoin_hashers::{poseidon::PoseidonDomain, Domain};
    use std::os::unix::fs::FileExt;
    use storage_proofs_porep::stacked::Challenges;
    let s = &cfg.sectors[i];
    let c1 = || {
        let registered_proof = serde_json::from_value(cfg.proof_name().into()).unwrap();
        let pre = filecoin_proofs_api::seal::SealPreCommitPhase2Output { registered_proof, comm_r, comm_d };
        std::panic::catch_unwind(|| {
            filecoin_proofs_api::seal::seal_commit_phase1(
                &paths.cache,
                &paths.sealed,
                s.prover_id,
                s.sector_id.into(),
                s.ticket,
                seed,
                pre,
                &[],
            )
        })
        .map_err(|_| anyhow::anyhow!("panicked"))
        .and_then(|r| r)
    };
    let picked = serde_json::to_value(c1().expect("C1 before the flip")).unwrap();
    let per_partition = collect_challenges(&picked["vanilla_proofs"]).len();
    let rid = sealer_hash::replica_id(&s.prover_id, s.sector_id, &s.ticket, &comm_d, &cfg.porep_id);
    let Challenges::Synth(synth) = Challenges::new_synthetic(per_partition) else { unreachable!() };
    let (rid, cr) = (PoseidonDomain::try_from_bytes(&rid).unwrap(), PoseidonDomain::try_from_bytes(&comm_r).unwrap());
    let index = synth.derive_indexes(cfg.nodes() as usize, &rid, &cr, &seed, 0)[0] as u64;
    let cost = sealer_proofs::synth::cost(cfg.sector_size).unwrap();
    let record = (cost.file_bytes - 96) / cost.challenges;
    let at = 96 + index * record + record / 2;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(file).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    assert!(c1().is_err(), "C1 accepted sector {i}'s file with record {index} corrupted");
    f.write_all_at(&b, at).unwrap();
    c1().expect("C1 after the record was restored");
}

/// The challenged nodes in C1's serialized vanilla proofs (their labeling proofs' `node`).
fn collect_challenges(v: &serde_json::Value) -> Vec<u64> {
    match v {
        serde_json::Value::Object(m) => match m.get("node").and_then(|c| c.as_u64()) {
            Some(c) => vec![c],
            None => m.values().flat_map(collect_challenges).collect(),
        },
        serde_json::Value::Array(a) => a.iter().flat_map(collect_challenges).collect(),
        _ => vec![],
    }
}

/// The slot striped over three layer files (at an offset): a range's pages are read in one
/// large request per file, and ranges end at every file in turn (1024 pages a range).
#[test]
fn pc2_mib8_three_layer_files() {
    let seed = common::random_seed("pc2_mib8_three_layer_files");
    pc2_case_with(8 << 20, 6, 2, seed, 1, false, false, &[], Pc2Engine::Cpu, 3);
}

/// The GPU engine over three layer files, a data sector beside a CC one.
#[test]
fn pc2_kib2_gpu_engine_three_layer_files() {
    let seed = common::random_seed("pc2_kib2_gpu_engine_three_layer_files");
    pc2_case_with(2048, 5, 8, seed, 2, false, false, &[&[], &[100, 500, 200]], Pc2Engine::Gpu, 3);
}

#[test]
fn pc2_kib2_v1_1_n16_with_c1() {
    pc2_case(2048, 5, 16, 603, 16, true);
}

#[test]
fn pc2_mib8_v1_1_n4_with_c1() {
    pc2_case(8 << 20, 6, 4, 604, 2, true);
}

/// Data sectors: one piece filling the sector, three pieces of odd sizes with alignment
/// padding between them, one small piece with the rest zero, beside a CC sector; replica,
/// tree-d and every other file equal filecoin-proofs' with the same pieces, and its C1 accepts them.
#[test]
fn pc2_kib2_data_sectors_beside_cc_with_c1() {
    pc2_case_with(2048, 5, 4, 608, 4, true, false, &[&[2032], &[], &[100, 500, 200], &[127]], Pc2Engine::Cpu, 2);
}

/// The same at 8 MiB: a sector of three pieces with padding between them beside a CC sector.
#[test]
fn pc2_mib8_data_and_cc_sectors() {
    pc2_case_with(8 << 20, 6, 2, 609, 1, true, false, &[&[1000, 300_000, 5000]], Pc2Engine::Cpu, 2);
}

/// SyntheticPoRep with a data sector beside a CC one: the synthetic proofs (made with the
/// sector's pieces) equal filecoin-proofs' own, and its C1 accepts the outputs.
#[test]
fn pc2_kib2_synth_data_sector_proofs_and_c1() {
    pc2_case_with(2048, 10, 2, 610, 2, true, false, &[&[100, 500, 200]], Pc2Engine::Cpu, 2);
}

/// NI-PoRep: each sector's C1 output right after PC2 (no seed), a data sector beside a CC one.
#[test]
fn pc2_kib2_ni_porep_c1_after_pc2() {
    pc2_case_with(2048, 15, 2, 611, 2, true, false, &[&[], &[100, 500, 200]], Pc2Engine::Cpu, 2);
}

/// NI-PoRep at 8 MiB: a CC sector's C1 output equals filecoin-proofs-api's on its own files.
#[test]
fn pc2_mib8_ni_porep_c1_after_pc2() {
    pc2_case_with(8 << 20, 16, 1, 612, 1, true, false, &[], Pc2Engine::Cpu, 2);
}

/// The GPU engine (OpenCL device 0), random inputs: CC and data sectors side by side, every
/// file equal to filecoin-proofs', and its C1 accepts them.
#[test]
fn pc2_kib2_gpu_engine_cc_and_data_with_c1() {
    let seed = common::random_seed("pc2_kib2_gpu_engine_cc_and_data_with_c1");
    pc2_case_with(2048, 5, 4, seed, 4, true, false, &[&[2032], &[], &[100, 500, 200], &[]], Pc2Engine::Gpu, 2);
}

/// The GPU engine at 8 MiB, random inputs: a data sector beside a CC one.
#[test]
fn pc2_mib8_gpu_engine_cc_and_data() {
    let seed = common::random_seed("pc2_mib8_gpu_engine_cc_and_data");
    pc2_case_with(8 << 20, 6, 2, seed, 2, false, false, &[&[], &[1000, 300_000, 5000]], Pc2Engine::Gpu, 2);
}
