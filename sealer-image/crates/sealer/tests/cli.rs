//! Tests that drive the `sealer` binary: restart after a kill, config errors and exit codes,
//! verify-pc1 catching corruption, calc output.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sealer"));
    c.env("SEALER_TEST_SLOW_CHUNK_US", "0");
    c
}

/// A batch config written to a file, and the `sealer` subcommands the tests run on it.
struct ConfigFile(PathBuf);

impl ConfigFile {
    fn write(path: PathBuf, json: &serde_json::Value) -> Self {
        std::fs::write(&path, json.to_string()).unwrap();
        ConfigFile(path)
    }
    /// `sealer <sub> --config <file> <extra…>`.
    fn cmd(&self, sub: &str, extra: &[&str]) -> Command {
        let mut c = bin();
        c.arg(sub).arg("--config").arg(&self.0).args(extra);
        c
    }
    /// `pc1` or `batch`, quiet, with the portable hasher allowed (not every CI CPU has SHA-NI).
    fn seal(&self, sub: &str) -> Command {
        self.cmd(sub, &["--quiet", "--allow-portable-hash"])
    }
    fn verify(&self) -> Output {
        self.cmd("verify-pc1", &["--nodes", "200", "--seed", "7"]).output().unwrap()
    }
    fn export(&self, out: &Path) {
        assert!(self.cmd("layer-export", &["--out", out.to_str().unwrap()]).status().unwrap().success());
    }
}

#[test]
fn killed_run_resumes_at_first_incomplete_layer_and_matches_oracle() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, json) = common::config(8 << 20, 6, 4, 501, work.path(), 2);
    let file = ConfigFile::write(work.path().join("batch.json"), &json);
    let state = work.path().join("out/pc1-state.json");

    // First run, slowed down so the kill lands in layer 2.
    let mut child = file
        .seal("pc1")
        .env("SEALER_TEST_SLOW_CHUNK_US", "4000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(&state) {
            let v: serde_json::Value = serde_json::from_str(&s).unwrap();
            if v["layers_done"] == 1 {
                break;
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "sealer exited before the kill");
        assert!(t0.elapsed() < Duration::from_secs(120), "layer 1 never completed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.path().join("out/progress.json")).unwrap()).unwrap();
    assert_eq!(p["layer"], 2, "killed during layer 2: {p}");
    assert!(p["layer_percent"].as_f64().unwrap() < 100.0);

    // Second run resumes at layer 2.
    let out = file.seal("pc1").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("resuming batch at layer 2"), "{stderr}");
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["first_layer_this_run"], 2);

    // Export, verify, compare with the oracle.
    let export = work.path().join("export");
    file.export(&export);
    let (rids, cds) = sealer_slot::sector_ids(&cfg);
    for (i, s) in rep["sectors"].as_array().unwrap().iter().enumerate() {
        assert_eq!(s["replica_id"], hex::encode(rids[i]));
    }
    common::compare_with_oracle(&cfg, &rids, &cds, &export, work.path());

    let v = file.verify();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));

    // Corrupt layer 2 on device 0 and verify must notice (exit code 5).
    let g = sealer_slot::geometry(&cfg, sealer_slot::Tuning::default());
    let stripe = sealer_slot::stripe(&cfg, &g);
    let (_, off) = stripe.locate(2, 0);
    let dev0 = &cfg.layers.paths[0];
    let mut data = std::fs::read(dev0).unwrap();
    let len = (stripe.blocks_per_layer * 4096) as usize;
    for b in &mut data[off as usize..off as usize + len] {
        *b ^= 0x5a;
    }
    std::fs::write(dev0, data).unwrap();
    let v = file.verify();
    assert_eq!(v.status.code(), Some(5), "{}", String::from_utf8_lossy(&v.stdout));

    // A third run notices that layer 2 is no longer what it wrote and labels it again.
    let out = file.seal("pc1").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("layer 2 on storage is not the one this batch wrote"), "{stderr}");
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["first_layer_this_run"], 2);
    let v = file.verify();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));

    // A fourth run has nothing left to do.
    let out = file.seal("pc1").output().unwrap();
    assert!(out.status.success());
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["labels"], 0);
}

/// The state file sits in the output directory, which outlives the layer slot: after the
/// slot is scrubbed (release) a batch with the same inputs must label again, not run PC2 on
/// zeros (which gives every sector the same, wrong, CommR).
#[test]
fn finished_state_over_a_scrubbed_slot_labels_again_and_matches_oracle() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, json) = common::config(8 << 20, 6, 2, 777, work.path(), 1);
    let file = ConfigFile::write(work.path().join("batch.json"), &json);
    let pc1 = || file.seal("pc1").output().unwrap();
    let out = pc1();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Scrub: the slot reads as zeros, the state file still says every layer is done.
    for p in &cfg.layers.paths {
        let len = std::fs::metadata(p).unwrap().len();
        std::fs::write(p, vec![0u8; len as usize]).unwrap();
    }
    assert_eq!(sealer_slot::layers_done(&cfg), 0, "a scrubbed slot holds no finished layer");
    let out = pc1();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("layer 1 on storage is not the one this batch wrote"), "{stderr}");
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["first_layer_this_run"], 1);
    assert_eq!(sealer_slot::layers_done(&cfg), cfg.num_layers());

    let export = work.path().join("export");
    file.export(&export);
    let (rids, cds) = sealer_slot::sector_ids(&cfg);
    common::compare_with_oracle(&cfg, &rids, &cds, &export, work.path());
}

/// `sealer stage` writes a data sector's file and prints its `data`; a data sector whose file
/// does not hold its pieces (or whose comm_d is not its pieces', or whose file is not
/// fr32-padded) is left out of the batch with its reason naming the sector, the file and both
/// values, and the CC sector beside it is sealed; with every sector bad the batch fails with
/// exit 7 before the slot is touched; the right pieces seal.
#[test]
fn a_bad_data_sector_is_left_out_and_the_rest_sealed() {
    let work = tempfile::tempdir().unwrap();
    let pieces: Vec<PathBuf> = [700usize, 200]
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let p = work.path().join(format!("piece-{i}"));
            std::fs::write(&p, (0..len).map(|j| (j * 7 + i) as u8).collect::<Vec<_>>()).unwrap();
            p
        })
        .collect();
    let staged = work.path().join("staged");
    let out = bin()
        .args(["stage", "--sector-size", "2KiB", "--out", staged.to_str().unwrap()])
        .args(pieces.iter().flat_map(|p| ["--piece", p.to_str().unwrap()]))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let data: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(data["pieces"].as_array().unwrap().len(), 2);
    assert_eq!(std::fs::metadata(&staged).unwrap().len(), 2048);
    let comm_d = data["comm_d"].as_str().unwrap().to_string();
    // --sealbatch-file prints the same pieces as a SealBatch sector's `data` (cid, size).
    let out = bin()
        .args(["stage", "--sector-size", "2KiB", "--out", staged.to_str().unwrap(), "--sealbatch-file", "b/s-1"])
        .args(pieces.iter().flat_map(|p| ["--piece", p.to_str().unwrap()]))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sb: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sb["file"], "b/s-1");
    for (i, p) in sb["pieces"].as_array().unwrap().iter().enumerate() {
        assert_eq!(p["cid"], data["pieces"][i]["comm_p"]);
        assert_eq!(p["size"], data["pieces"][i]["size"]);
    }
    assert_eq!(sb["pieces"].as_array().unwrap().len(), 2);

    let (_, mut json) = common::config(2048, 5, 2, 10, work.path(), 1);
    let sector = json["sectors"][1]["sector_id"].to_string();
    // Each case in a fresh slot and output directory (the first run's record of left-out
    // sectors is what a restarted run reads).
    let run = |json: &serde_json::Value, case: &str| -> (Output, PathBuf) {
        let dir = work.path().join(case);
        std::fs::create_dir_all(&dir).unwrap();
        let mut json = json.clone();
        json["layers"]["paths"] = serde_json::json!([dir.join("dev0.img").to_str().unwrap()]);
        json["output_dir"] = dir.join("out").to_str().unwrap().into();
        json.as_object_mut().unwrap().remove("progress_file");
        (ConfigFile::write(dir.join("data.json"), &json).seal("batch").output().unwrap(), dir)
    };
    // The bad data sector is left out with its reason; the CC sector beside it is sealed.
    let left_out = |json: &serde_json::Value, case: &str, words: &[&str]| {
        let (out, dir) = run(json, case);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let res: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(res["sectors"][0]["comm_d"], hex::encode(sealer_hash::cc_comm_d(2048)), "{res}");
        let failed = &res["sectors"][1];
        assert_eq!(failed["sector_id"].to_string(), sector);
        assert_eq!(failed["failure_class"], "data-mismatch", "{failed}");
        let why = failed["failed"].as_str().unwrap();
        for w in words {
            assert!(why.contains(w), "{w:?} not in {why}");
        }
        common::assert_results_contract(3, &serde_json::json!({ "sectors": [failed] }));
        assert!(!dir.join("out").join(&sector).exists(), "outputs of the left-out sector");
        assert!(!dir.join("out/.filler").exists(), "the filler's outputs were kept");
        let file: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("out/results.json")).unwrap()).unwrap();
        assert_eq!(file["sectors"], res["sectors"], "results.json");
    };
    // The pieces in the wrong order: the file does not hold them.
    let mut swapped = data.clone();
    swapped["pieces"].as_array_mut().unwrap().reverse();
    swapped.as_object_mut().unwrap().remove("comm_d");
    json["sectors"][1]["data"] = swapped;
    let want = sealer_data::pieces_comm_d(
        2048,
        &[
            sealer_config::Piece {
                comm_p: hex32(&data["pieces"][1]["comm_p"]),
                size: data["pieces"][1]["size"].as_u64().unwrap(),
            },
            sealer_config::Piece {
                comm_p: hex32(&data["pieces"][0]["comm_p"]),
                size: data["pieces"][0]["size"].as_u64().unwrap(),
            },
        ],
    )
    .unwrap();
    left_out(
        &json,
        "swapped",
        &[&format!("sector {sector}"), "does not hold those pieces", &comm_d, &hex::encode(want)],
    );
    // The right pieces under another comm_d.
    let mut right = data.clone();
    right.as_object_mut().unwrap().remove("comm_d");
    json["sectors"][1]["data"] = right;
    json["sectors"][1]["comm_d"] = "0b".repeat(32).into();
    left_out(&json, "comm-d", &["sectors[1].comm_d", &format!("sector {sector}"), &comm_d, &"0b".repeat(32)]);
    // The raw piece as the sector file: not fr32-padded.
    json["sectors"][1].as_object_mut().unwrap().remove("comm_d");
    let raw = work.path().join("raw");
    std::fs::write(&raw, vec![0xffu8; 2048]).unwrap();
    json["sectors"][1]["data"]["path"] = raw.to_str().unwrap().into();
    left_out(&json, "not-fr32", &[&format!("sector {sector}"), "not a field element", raw.to_str().unwrap()]);
    // Every sector bad: nothing to seal, exit 7 with each reason, the slot untouched.
    let mut all_bad = json.clone();
    all_bad["sectors"][0]["data"] = json["sectors"][1]["data"].clone();
    let (out, dir) = run(&all_bad, "all-bad");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("every sector of the batch failed its checks"), "{err}");
    assert_eq!(err.matches("not a field element").count(), 2, "{err}");
    assert!(!dir.join("dev0.img").exists(), "the slot was touched");
    // The staged file: sealed, with the comm_d its pieces make.
    json["sectors"][1]["data"]["path"] = staged.to_str().unwrap().into();
    let (out, _) = run(&json, "good");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let res: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(res["sectors"][1]["comm_d"], comm_d.as_str());
    assert_eq!(res["sectors"][0]["comm_d"], hex::encode(sealer_hash::cc_comm_d(2048)));
}

/// A batch of four 2 KiB sectors, one CC, one with good deal data, one whose staged file is not
/// its pieces' and one with a wrong comm_d: the two bad ones are left out with their reasons,
/// and the good ones' comm_r and replicas equal filecoin-proofs' (random inputs), their C1
/// passing filecoin-proofs' own checks.
#[test]
fn one_bad_sector_never_costs_the_batch() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let seed = common::random_seed("one_bad_sector_never_costs_the_batch");
    let (_, mut json) = common::config(2048, 5, 4, seed, work.path(), 1);
    let mut rng = seed;
    let mut stage = |i: usize| {
        let piece = work.path().join(format!("piece-{i}"));
        let bytes: Vec<u8> = (0..1000)
            .map(|_| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (rng >> 33) as u8
            })
            .collect();
        std::fs::write(&piece, bytes).unwrap();
        let staged = work.path().join(format!("staged-{i}"));
        let pieces = sealer_data::stage(2048, &[piece.as_path()], &staged).unwrap();
        serde_json::json!({"path": staged.to_str().unwrap(),
            "pieces": pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>()})
    };
    json["sectors"][1]["data"] = stage(1);
    json["sectors"][2]["data"] = stage(2);
    let other = stage(4);
    json["sectors"][2]["data"]["path"] = other["path"].clone(); // a file that does not hold its pieces
    json["sectors"][3]["data"] = stage(3);
    json["sectors"][3]["comm_d"] = "0c".repeat(32).into();
    let out = ConfigFile::write(work.path().join("batch.json"), &json).seal("batch").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let res: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<u64> = json["sectors"].as_array().unwrap().iter().map(|s| s["sector_id"].as_u64().unwrap()).collect();
    let entry = |id: u64| res["sectors"].as_array().unwrap().iter().find(|e| e["sector_id"] == id).cloned().unwrap();
    assert!(entry(ids[2])["failed"].as_str().unwrap().contains(other["path"].as_str().unwrap()), "{res}");
    assert!(entry(ids[3])["failed"].as_str().unwrap().contains(&"0c".repeat(32)), "{res}");

    // The good sectors against filecoin-proofs: comm_r, the replica, and C1 on our outputs.
    let mut good = json.clone();
    good["sectors"] = serde_json::json!([json["sectors"][0], json["sectors"][1]]);
    let mut cfg = sealer_config::BatchConfig::from_json(&good.to_string()).unwrap();
    sealer_data::resolve_comm_ds(&mut cfg).unwrap();
    let oracle_dir = work.path().join("oracle");
    std::fs::create_dir_all(&oracle_dir).unwrap();
    for s in &cfg.sectors {
        let ours = entry(s.sector_id);
        assert!(ours["failed"].is_null(), "{ours}");
        let o = sealer_oracle::precommit_sector(&cfg, s, &oracle_dir).unwrap();
        assert_eq!(ours["comm_r"], hex::encode(o.comm_r), "comm_r of sector {}", s.sector_id);
        let p = sealer_config::sector_paths(&cfg, s.sector_id);
        assert!(
            std::fs::read(&p.sealed).unwrap() == std::fs::read(&o.sealed).unwrap(),
            "replica of sector {}",
            s.sector_id
        );
        let proofs = sealer_oracle::commit_phase1(&cfg, s, &p.cache, &p.sealed, [7; 32], o.comm_r, o.comm_d).unwrap();
        assert!(proofs > 0);
    }
}

/// A sector that fails in PC2, after PC1 labelled it, costs only itself: one data sector's
/// staged file changes after PC1 (its comm_d no longer matches), another sector's cache
/// directory cannot be created (a file is in its place); `sealer pc2` gives those two up
/// with their reasons, deletes what it wrote for them, and the other two sectors' comm_r and
/// replicas equal filecoin-proofs' (random inputs). With every sector failing, PC2 fails.
#[test]
fn a_sector_failing_in_pc2_costs_only_itself() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let seed = common::random_seed("a_sector_failing_in_pc2_costs_only_itself");
    let (_, mut json) = common::config(2048, 5, 4, seed, work.path(), 1);
    let piece_bytes = |tag: u64| -> Vec<u8> {
        let mut rng = seed ^ tag;
        (0..1500)
            .map(|_| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (rng >> 33) as u8
            })
            .collect()
    };
    for i in [1usize, 2] {
        let piece = work.path().join(format!("piece-{i}"));
        std::fs::write(&piece, piece_bytes(i as u64)).unwrap();
        let staged = work.path().join(format!("staged-{i}"));
        let pieces = sealer_data::stage(2048, &[piece.as_path()], &staged).unwrap();
        json["sectors"][i]["data"] = serde_json::json!({"path": staged.to_str().unwrap(),
            "pieces": pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>()});
    }
    let file = ConfigFile::write(work.path().join("batch.json"), &json);
    let out = file.seal("pc1").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // After PC1: sector 2's staged file is another piece's, sector 3's cache is a file.
    let mut cfg = sealer_config::BatchConfig::from_json(&json.to_string()).unwrap();
    sealer_data::resolve_comm_ds(&mut cfg).unwrap();
    let ids: Vec<u64> = cfg.sectors.iter().map(|s| s.sector_id).collect();
    let other = work.path().join("piece-other");
    std::fs::write(&other, piece_bytes(9)).unwrap();
    sealer_data::stage(2048, &[other.as_path()], Path::new(json["sectors"][2]["data"]["path"].as_str().unwrap()))
        .unwrap();
    let blocked = sealer_config::sector_paths(&cfg, ids[3]).cache;
    std::fs::create_dir_all(blocked.parent().unwrap()).unwrap();
    std::fs::write(&blocked, b"not a directory").unwrap();

    let out = file.cmd("pc2", &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let res: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let entry = |id: u64| res["sectors"].as_array().unwrap().iter().find(|e| e["sector_id"] == id).cloned().unwrap();
    let changed = entry(ids[2]);
    assert_eq!(changed["failure_class"], "data-mismatch", "{changed}");
    let why = changed["failed"].as_str().unwrap();
    assert!(why.starts_with(&format!("sector {}: ", ids[2])) && why.contains("changed during the batch"), "{why}");
    let unwritable = entry(ids[3]);
    assert_eq!(unwritable["failure_class"], "io", "{unwritable}");
    assert!(unwritable["failed"].as_str().unwrap().contains(blocked.to_str().unwrap()), "{unwritable}");
    common::assert_results_contract(3, &serde_json::json!({ "sectors": [changed, unwritable] }));
    let p2 = sealer_config::sector_paths(&cfg, ids[2]);
    assert!(!p2.sealed.exists() && !p2.cache.exists(), "the given-up sector's outputs were kept");
    assert_eq!(std::fs::read(&blocked).unwrap(), b"not a directory", "a path PC2 could not open was touched");
    let file_res: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cfg.output_dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(file_res["sectors"], res["sectors"], "results.json");

    // The two others against filecoin-proofs.
    let oracle_dir = work.path().join("oracle");
    std::fs::create_dir_all(&oracle_dir).unwrap();
    for s in &cfg.sectors[..2] {
        let ours = entry(s.sector_id);
        assert!(ours["failed"].is_null(), "{ours}");
        let o = sealer_oracle::precommit_sector(&cfg, s, &oracle_dir).unwrap();
        assert_eq!(ours["comm_r"], hex::encode(o.comm_r), "comm_r of sector {}", s.sector_id);
        let p = sealer_config::sector_paths(&cfg, s.sector_id);
        assert!(std::fs::read(&p.sealed).unwrap() == std::fs::read(&o.sealed).unwrap(), "replica of {}", s.sector_id);
    }

    // Every sector failing: PC2 fails, every reason named.
    for s in &cfg.sectors[..3] {
        let cache = sealer_config::sector_paths(&cfg, s.sector_id).cache;
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::write(&cache, b"not a directory").unwrap();
    }
    let out = file.cmd("pc2", &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("every sector of the batch failed in PC2"), "{stderr}");
    for s in &cfg.sectors {
        assert!(stderr.contains(&format!("sector {}: PC2 could not open its outputs", s.sector_id)), "{stderr}");
    }
}

/// `sealer snap` updates the CC sectors a `sealer batch` sealed with staged deal data: its
/// comm_r_new equals filecoin-proofs' encode_into on the same files, and a comm_d that is not
/// the pieces' fails with exit 7 before anything is written; of two sectors, one whose sector
/// key does not make its given comm_r_old is left out and the other updated.
#[test]
fn snap_updates_sealed_cc_sectors_like_filecoin_proofs() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, json) = common::config(2048, 5, 2, 12, work.path(), 1);
    let out = ConfigFile::write(work.path().join("cc.json"), &json).seal("batch").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sealed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    common::assert_results_contract(0, &sealed);
    // `batch` says how long this run's PC1 and PC2 took.
    let t = &sealed["timings"];
    assert!(t["pc1_seconds"].as_f64().unwrap() > 0.0 && t["pc2_seconds"].as_f64().unwrap() > 0.0, "{sealed}");

    let piece = work.path().join("piece");
    std::fs::write(&piece, (0..1500u32).map(|i| (i * 13) as u8).collect::<Vec<_>>()).unwrap();
    let staged = work.path().join("staged");
    let pieces = sealer_data::stage(2048, &[piece.as_path()], &staged).unwrap();
    let sector = &cfg.sectors[1];
    let key = sealer_config::sector_paths(&cfg, sector.sector_id);
    let mut snap = serde_json::json!({
        "registered_proof": "StackedDrg2KiBV1_1",
        "output_dir": work.path().join("update").to_str().unwrap(),
        "sectors": [{"sector_id": sector.sector_id, "sector_key": key.sealed.to_str().unwrap(),
            "sector_key_cache": key.cache.to_str().unwrap(),
            "data": {"path": staged.to_str().unwrap(),
                "pieces": pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>()},
            "comm_d": "0a".repeat(32)}]
    });
    let run = |snap: &serde_json::Value| {
        let f = work.path().join("snap.json");
        std::fs::write(&f, snap.to_string()).unwrap();
        bin().args(["snap", "--config", f.to_str().unwrap()]).output().unwrap()
    };
    let out = run(&snap);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("sectors[0].comm_d") && err.contains(&format!("sector {}", sector.sector_id)), "{err}");
    assert!(!work.path().join("update").exists(), "an update was written for mismatching data");

    snap["sectors"][0].as_object_mut().unwrap().remove("comm_d");
    let term = work.path().join("termination-log");
    let f = work.path().join("snap.json");
    std::fs::write(&f, snap.to_string()).unwrap();
    let out =
        bin().args(["snap", "--config", f.to_str().unwrap()]).env("SEALER_TERMINATION_LOG", &term).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let res: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    common::assert_results_contract(1, &res);
    assert_eq!(res["sectors"][0]["comm_r_old"], sealed["sectors"][1]["comm_r"]);
    // The operator reads the results from the termination message, or the log's results line.
    let msg: serde_json::Value = serde_json::from_slice(&std::fs::read(&term).unwrap()).unwrap();
    assert_eq!(msg, res, "termination message");
    let line =
        String::from_utf8_lossy(&out.stderr).lines().find_map(|l| l.strip_prefix("SEALER_RESULTS ").map(String::from));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&line.expect("results line")).unwrap(), res);
    // `sealer oracle-snap` (the e2e's reference) runs filecoin-proofs on the same config.
    let o = bin()
        .args([
            "oracle-snap",
            "--config",
            f.to_str().unwrap(),
            "--work",
            work.path().join("oracle-snap").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let theirs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in ["comm_r_new", "comm_r_last_new", "comm_d_new"] {
        assert_eq!(theirs["sectors"][0][k], res["sectors"][0][k], "oracle-snap {k}");
    }
    let mut data_sector = sector.clone();
    data_sector.data = Some(sealer_config::SectorData { path: staged.clone(), pieces: pieces.clone() });
    let o = work.path().join("oracle");
    let (cr, _, cd) =
        sealer_oracle::snap_encode(&cfg, &data_sector, &key.sealed, &key.cache, &o.join("sealed"), &o.join("cache"))
            .unwrap();
    assert_eq!(res["sectors"][0]["comm_r_new"], hex::encode(cr).as_str());
    assert_eq!(res["sectors"][0]["comm_d_new"], hex::encode(cd).as_str());
    let update = work.path().join("update").join(sector.sector_id.to_string());
    assert!(
        std::fs::read(update.join("sealed")).unwrap() == std::fs::read(o.join("sealed")).unwrap(),
        "updated replica"
    );

    // Two sectors, each with the commR its key must have: sector 0's key is misplaced (it
    // is sector 1's, whose p_aux makes another commR), so sector 0 is left out with its
    // reason and nothing written for it; sector 1 is updated as before.
    let other = &cfg.sectors[0];
    let mut two = snap.clone();
    two["output_dir"] = work.path().join("update-two").to_str().unwrap().into();
    two["sectors"][0]["comm_r_old"] = sealed["sectors"][1]["comm_r"].clone();
    let mut misplaced = two["sectors"][0].clone();
    misplaced["sector_id"] = other.sector_id.into();
    misplaced["comm_r_old"] = sealed["sectors"][0]["comm_r"].clone();
    two["sectors"] = serde_json::json!([misplaced, two["sectors"][0]]);
    let out = run(&two);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let res2: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(res2["sectors"][0]["comm_r_new"], res["sectors"][0]["comm_r_new"], "{res2}");
    let left_out = &res2["sectors"][1];
    assert_eq!(
        (&left_out["sector_id"], &left_out["failure_class"]),
        (&other.sector_id.into(), &"data-mismatch".into())
    );
    let why = left_out["failed"].as_str().unwrap();
    assert!(why.contains("the sector key is not that sector's") && why.contains(key.cache.to_str().unwrap()), "{why}");
    common::assert_results_contract(3, &serde_json::json!({ "sectors": [left_out] }));
    assert!(!work.path().join("update-two").join(other.sector_id.to_string()).join("sealed").exists());
}

/// `sealer plan` of a `pc2_engine: gpu` batch shows the range and memory PC2 will use on the
/// devices here (pocl's CPU device, named by SEALER_GPU_DEVICE), and fails its check where no
/// device would be chosen, as the batch would exit 8.
#[test]
fn plan_shows_what_pc2_takes_on_the_gpu() {
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(8 << 20, 5, 4, 17, work.path(), 2);
    json["pc2_engine"] = "gpu".into();
    let cfg = ConfigFile::write(work.path().join("plan.json"), &json);
    let out = cfg.cmd("plan", &["--json"]).env("SEALER_GPU_DEVICE", "0").output().unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu = p["checks"].as_array().unwrap().iter().find(|c| c["what"] == "PC2 devices").expect("a GPU check");
    assert_eq!(gpu["ok"], true, "{gpu}");
    let g = &p["pc2_gpu"];
    let range = g["range"].as_u64().unwrap();
    assert!(range.is_power_of_two() && range <= (8 << 20) / 32, "{g}");
    assert_eq!(g["parts"], 1);
    // In flight at once on the device, each with a set of layer buffers, plus one being read;
    // as many readback sets (both trees' levels and the replica, at most 2 + 2/7 nodes a row).
    let f = g["in_flight"].as_u64().unwrap();
    assert!((1..=2).contains(&f), "{g}");
    let part = range * 4 * 32;
    let host = (f + 1) * (2 * range.div_ceil(4096 / (4 * 32)) * 4096 + 2 * part + 2 * part / 7);
    assert_eq!(g["host_bytes"].as_u64().unwrap(), host, "{g}");
    assert!(gpu["detail"].as_str().unwrap().contains(&format!("ranges of {range} nodes")), "{gpu}");
    // A device index that is not there: the check fails, naming the devices there are.
    let out = cfg.cmd("plan", &["--json"]).env("SEALER_GPU_DEVICE", "7").output().unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpu = p["checks"].as_array().unwrap().iter().find(|c| c["what"] == "PC2 devices").unwrap();
    assert_eq!(gpu["ok"], false, "{gpu}");
    assert!(gpu["detail"].as_str().unwrap().contains("no OpenCL device 7"), "{gpu}");
    assert!(p["pc2_gpu"].is_null());
}

/// `sealer plan` reads the machine without touching it: ready (exit 0) with a built node
/// parent cache and room for the slot and outputs, naming the fix (exit 2) without the cache;
/// its resource estimate matches the batch's geometry.
#[test]
fn plan_checks_the_machine_without_touching_it() {
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("parent-cache");
    let (_, mut json) = common::config(2048, 5, 4, 13, work.path(), 2);
    json["parent_cache_dir"] = cache.to_str().unwrap().into();
    let cfg = ConfigFile::write(work.path().join("plan.json"), &json);
    let plan = |extra: &[&str]| cfg.cmd("plan", &[&["--json"], extra].concat()).output().unwrap();

    let out = plan(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed: Vec<_> = p["checks"].as_array().unwrap().iter().filter(|c| c["ok"] == false).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["what"], "parent cache");
    assert!(
        failed[0]["detail"].as_str().unwrap().contains("sealer parent-cache --proof StackedDrg2KiBV1_1"),
        "{failed:?}"
    );
    assert!(!work.path().join("dev0.img").exists() && !work.path().join("out").exists(), "plan touched storage");

    let built = bin()
        .args(["parent-cache", "--proof", "StackedDrg2KiBV1_1", "--dir", cache.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let out = plan(&["--rate", "2e6"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &p["resources"];
    assert_eq!(r["output_bytes_per_sector"].as_u64(), Some(sealer_pc2::output_bytes_per_sector(2048, 2, true)));
    assert_eq!(r["output_bytes"].as_u64(), Some(4 * sealer_pc2::output_bytes_per_sector(2048, 2, true)));
    assert_eq!(r["labels"].as_u64(), Some(4 * 64 * 2));
    assert_eq!(r["slot_bytes"].as_u64(), Some(2 * 2 * 4096), "2 layers of 2 pages (32 nodes of 4 sectors a page)");
    assert_eq!(r["previous_layer_in_memory"], true);
    assert_eq!(r["read_iops"].as_f64(), Some(0.0));
    let hashers = r["hashers"].as_f64().unwrap();
    assert!((r["pc1_seconds"].as_f64().unwrap() - 512.0 / (2e6 * hashers)).abs() < 1e-9, "{r}");
    assert!(!work.path().join("dev0.img").exists(), "plan created a layer file");
    // The table names every check.
    let out = cfg.cmd("plan", &[]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for w in ["layout", "parent cache", "layer device", "hugepages", "output space", "layer slot", "outputs:"] {
        assert!(text.contains(w), "{w:?} not in {text}");
    }
}

/// `sealer plan --qualification`: PC2's reads and writes bounds from the layer devices'
/// measured bandwidths, summed over the devices the slot stripes across, and the bound named;
/// without it they are left out, and a document that measured none of them is refused.
#[test]
fn plan_bounds_pc2_by_the_measured_layer_devices() {
    let work = tempfile::tempdir().unwrap();
    let (_, json) = common::config(8 << 20, 6, 8, 14, work.path(), 2);
    let cfg = ConfigFile::write(work.path().join("plan.json"), &json);
    let doc = |paths: &[&str], read: f64, write: f64| {
        let devices: Vec<serde_json::Value> = paths
            .iter()
            .map(|p| serde_json::json!({"path": p, "seq_read_bytes_per_s": read, "seq_write_bytes_per_s": write}))
            .collect();
        let path = work.path().join(format!("q-{read}-{write}.json"));
        std::fs::write(&path, serde_json::json!({"schema": 1, "devices": devices}).to_string()).unwrap();
        path
    };
    let devs: Vec<&str> = json["layers"]["paths"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    let pc2 = |extra: &[&str]| {
        let out = cfg.cmd("plan", &[&["--json"], extra].concat()).output().unwrap();
        let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (p["pc2"].clone(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    // A slow pair of disks (100 kB/s each): the reads bound, 8 sectors × 2 layers × 8 MiB at
    // 200 kB/s.
    let slow = doc(&devs, 1e5, 50e6);
    let (p, _) = pc2(&["--qualification", slow.to_str().unwrap()]);
    assert_eq!(p["bound"], "reads", "{p}");
    let want = 8.0 * 2.0 * (8u64 << 20) as f64 / 2e5;
    assert!((p["read_seconds"].as_f64().unwrap() - want).abs() < 1e-6, "{p}");
    assert!((p["seconds_per_sector"].as_f64().unwrap() - want / 8.0).abs() < 1e-6, "{p}");
    // Fast ones leave the hashing as the bound; no figures leave the storage out.
    let fast = doc(&devs, 1e12, 1e12);
    assert_eq!(pc2(&["--qualification", fast.to_str().unwrap()]).0["bound"], "kernels");
    let (p, _) = pc2(&[]);
    assert_eq!((p["bound"].as_str(), p["read_seconds"].as_f64()), (Some("kernels"), Some(0.0)), "{p}");
    assert!(p["storage_basis"].as_str().unwrap().contains("--qualification"), "{p}");
    // The table says it too.
    let out = cfg.cmd("plan", &["--qualification", slow.to_str().unwrap()]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("bound by reads"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Another machine's devices: refused, naming them.
    let other = doc(&["/dev/nvme9n1"], 1e9, 1e9);
    let out = cfg.cmd("plan", &["--qualification", other.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("measured none of the batch's layer devices"));
}

fn hex32(v: &serde_json::Value) -> [u8; 32] {
    hex::decode(v.as_str().unwrap()).unwrap().try_into().unwrap()
}

#[test]
fn invalid_config_fails_before_work_naming_the_field() {
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 2, 9, work.path(), 1);
    json["sectors"][1]["ticket"] = "1234".into();
    let bad = ConfigFile::write(work.path().join("bad.json"), &json);
    let out = bad.cmd("pc1", &["--quiet"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sectors[1].ticket"), "{err}");
    assert!(!work.path().join("dev0.img").exists(), "no storage may be touched");

    // a comm_d without data: `batch` must not seal a CC replica under it (issue: it printed a CommR)
    let (_, mut json) = common::config(2048, 5, 2, 9, work.path(), 1);
    json["sectors"][1]["comm_d"] = "ab".repeat(32).into();
    let out = ConfigFile::write(work.path().join("bad.json"), &json).seal("batch").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let sector = json["sectors"][1]["sector_id"].to_string();
    assert!(err.contains("sectors[1].comm_d") && err.contains(&format!("sector {sector}")), "{err}");
    assert!(!work.path().join("dev0.img").exists(), "no storage may be touched");

    // a layout on more CPUs than this process was granted (the pod asked for too few)
    let n = (sealer_config::allowed_cpus().len() + 1).next_power_of_two().min(128);
    let (_, mut json) = common::config(2048, 5, n, 9, work.path(), 1);
    let hashers: Vec<_> = (0..n).map(|i| serde_json::json!({"cpu": 4001 + i, "sectors": 1})).collect();
    json["layout"] = serde_json::json!({"batch_size": n, "supported": true,
        "coordinators": [{"cpu": 4000, "hashers": hashers}],
        "roles": {"writer": 4000, "reader": 4000, "orchestrator": 4000, "pc2_reader": 4000, "pc2_hasher": 4000,
            "pc2_hasher_cpu": 4000, "pc2_writer": 4000, "c1_reader": 4000}});
    let out = ConfigFile::write(work.path().join("bad.json"), &json).seal("pc1").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`layout`") && err.contains("was granted"), "{err}");
    assert!(!work.path().join("dev0.img").exists(), "no storage may be touched");

    // a layout missing a role the operator's calculator always writes is a broken contract
    json["layout"]["roles"].as_object_mut().unwrap().remove("c1_reader");
    let out = ConfigFile::write(work.path().join("bad.json"), &json).seal("pc1").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("layout") && err.contains("c1_reader"), "{err}");
}

#[test]
fn layout_on_cpus_not_granted_runs_on_the_granted_ones() {
    // What the kubelet's `static` CPU manager does: the container gets CPUs of the kubelet's
    // choice. Here the layout names CPU 4000, which no machine grants.
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 2, 9, work.path(), 1);
    json["layout"] = serde_json::json!({"batch_size": 2, "supported": true,
        "coordinators": [{"cpu": 4000, "hashers": [{"cpu": 4000, "sectors": 2}]}],
        "roles": {"writer": 4000, "reader": 4000, "orchestrator": 4000, "pc2_reader": 4000, "pc2_hasher": 4000,
            "pc2_hasher_cpu": 4000, "pc2_writer": 4000, "c1_reader": 4000}});
    let out = ConfigFile::write(work.path().join("moved.json"), &json).seal("pc1").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let to = v["cpus"]["moved"]["4000"].as_u64().unwrap_or_else(|| panic!("{v}")) as usize;
    assert!(sealer_config::allowed_cpus().contains(&to), "{v}");
    assert!(err.contains("differ from the layout's") && err.contains(&format!("4000->{to}")), "{err}");
}

#[test]
fn buffers_on_the_hugepages_given_or_ordinary_pages_with_a_warning() {
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 4, 11, work.path(), 1);
    json["hugepages_1gi"] = 1.into();
    let run = |json: &serde_json::Value| {
        let out = ConfigFile::write(work.path().join("huge.json"), json).seal("pc1").arg("--restart").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{err}");
        (serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(), err)
    };
    // A real 1 GiB page where this test may reserve one (root, memory to spare).
    match common::Hugepage1G::reserve() {
        Some(_page) => {
            let (v, err) = run(&json);
            let b = &v["buffers"];
            assert_eq!(b["hugepages_mapped"], 1, "{v}\n{err}");
            assert!(b["hugepage_bytes"].as_u64().unwrap() > 0 && b["heap_bytes"] == 0, "{v}");
            assert!(err.contains("on 1 x 1 GiB hugepages"), "{err}");
        }
        None => eprintln!("no 1 GiB hugepage could be reserved (not root?): hugepage-backed run not exercised"),
    }
    // Asking for more pages than the pool holds: ordinary pages, and a warning says so.
    json["hugepages_1gi"] = 4096.into();
    let free =
        std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages").unwrap_or_default();
    if free.trim() == "0" || free.is_empty() {
        let (v, err) = run(&json);
        assert_eq!(v["buffers"]["hugepage_bytes"], 0, "{v}");
        assert!(err.contains("falling back to ordinary pages"), "{err}");
    }
    // None given: ordinary pages, said at info level.
    json["hugepages_1gi"] = 0.into();
    let (v, err) = run(&json);
    assert!(v["buffers"]["hugepage_bytes"] == 0 && v["buffers"]["heap_bytes"].as_u64().unwrap() > 0, "{v}");
    assert!(err.contains("hugepages_1gi = 0"), "{err}");
}

/// `sealer parent-cache` builds a node's cache once, keeps a verified one, rebuilds a truncated
/// or corrupt one; a batch given the directory uses the verified cache read-only and refuses
/// (exit 6, before any storage is touched) a missing or corrupt one.
#[test]
fn node_parent_cache_is_built_once_verified_and_never_used_corrupt() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("parent-cache");
    let build = || {
        let out = bin().args(["parent-cache", "--proof", "StackedDrg2KiBV1_1", "--dir"]).arg(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{err}");
        (serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(), err)
    };
    let (_, mut json) = common::config(2048, 5, 2, 13, work.path(), 1);
    json["parent_cache_dir"] = dir.display().to_string().into();
    let cfg = ConfigFile::write(work.path().join("cached.json"), &json);
    let seal = || cfg.seal("pc1").arg("--restart").output().unwrap();

    // No cache yet: refused before any storage is touched.
    let out = seal();
    assert_eq!(out.status.code(), Some(6), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!work.path().join("dev0.img").exists(), "no storage may be touched");

    let (m, err) = build();
    assert!(m["verified"] == true && m["bytes"] == 64 * 14 * 4, "{m}");
    assert!(err.contains("built"), "{err}");
    let file = dir.join(m["file"].as_str().unwrap());
    let digest = m["digest"].as_str().unwrap().to_string();
    let (again, err) = build();
    assert_eq!(again["digest"], digest.as_str());
    assert!(err.contains("verified"), "a verified cache is kept, not rebuilt: {err}");
    let out = seal();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Same size, one byte changed: the batch refuses it; the builder rebuilds it.
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let out = seal();
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("corrupt"), "{}", String::from_utf8_lossy(&out.stderr));
    let (m, err) = build();
    assert!(err.contains("rebuilt") && m["digest"] == digest.as_str(), "{err}\n{m}");

    // Truncated: rebuilt too.
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(100).unwrap();
    let (m, err) = build();
    assert!(err.contains("rebuilt") && m["digest"] == digest.as_str(), "{err}\n{m}");
    assert!(seal().status.success());
}

/// `batch` of SyntheticPoRep sectors ends with each sector's synthetic proofs and no layer
/// files, its progress at the last sector of phase `proofs`, with or without layer files (the
/// proofs read the slot when PC2 kept none); NI-PoRep told to keep no layer files refuses
/// before any work.
#[test]
fn synthetic_and_ni_porep_batches_write_their_proofs_and_drop_the_layers() {
    // SyntheticPoRep (proof id 10) writes its vanilla proofs, NI-PoRep (15) its C1 output.
    for (proof, file_name, layer_files) in [
        (10, sealer_proofs::synth::SYNTH_PROOFS_FILE, true),
        (10, sealer_proofs::synth::SYNTH_PROOFS_FILE, false),
        (15, sealer_proofs::c1::C1_OUTPUT_FILE, true),
    ] {
        let work = tempfile::tempdir().unwrap();
        let (cfg, json) = common::config(2048, proof, 2, 17, work.path(), 1);
        let file = ConfigFile::write(work.path().join("proofs.json"), &json);
        if proof == 15 {
            let out = file.cmd("batch", &["--quiet", "--allow-portable-hash", "--no-layer-files"]).output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
            assert!(!work.path().join("dev0.img").exists(), "no storage may be touched");
        }
        let out = if layer_files {
            file.seal("batch").output().unwrap()
        } else {
            file.cmd("batch", &["--quiet", "--allow-portable-hash", "--no-layer-files"]).output().unwrap()
        };
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for s in &cfg.sectors {
            let cache = sealer_config::sector_paths(&cfg, s.sector_id).cache;
            assert!(cache.join(file_name).metadata().unwrap().len() > 0, "proof {proof}: no {file_name}");
            assert!(!cache.join("sc-02-data-layer-1.dat").exists() && cache.join("p_aux").exists());
        }
        let progress: serde_json::Value =
            serde_json::from_slice(&std::fs::read(work.path().join("out/progress.json")).unwrap()).unwrap();
        let phase = if proof == 10 { "proofs" } else { "pc2" };
        assert_eq!((progress["phase"].as_str(), progress["state"].as_str()), (Some(phase), Some("done")), "{progress}");
        if proof == 10 {
            assert_eq!((progress["layer"].as_u64(), progress["layers"].as_u64()), (Some(2), Some(2)), "{progress}");
            // C1 on request, from the stored proofs (the layers and, without layer files, the
            // slot's labels are no longer read): each seeded sector's output names its seed.
            let seed = |i: usize| hex::encode([i as u8 + 0x40; 32]);
            let seeds: Vec<_> = cfg
                .sectors
                .iter()
                .enumerate()
                .map(|(i, s)| serde_json::json!({"sector_id": s.sector_id, "seed": seed(i)}))
                .collect();
            let seeds_path = work.path().join("seeds.json");
            std::fs::write(&seeds_path, serde_json::json!({ "sectors": seeds }).to_string()).unwrap();
            let _ = std::fs::remove_file(work.path().join("dev0.img"));
            let out = file.cmd("c1", &["--seeds", seeds_path.to_str().unwrap()]).output().unwrap();
            assert!(
                out.status.success(),
                "sealer c1 of a SyntheticPoRep batch: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            for (i, s) in cfg.sectors.iter().enumerate() {
                let c1 = sealer_config::sector_paths(&cfg, s.sector_id).cache.join(sealer_proofs::c1::C1_OUTPUT_FILE);
                let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&c1).unwrap()).unwrap();
                let got: Vec<u8> = serde_json::from_value(v["seed"].clone()).unwrap();
                assert_eq!(hex::encode(got), seed(i), "sector {i}: C1 output's seed");
            }
        }
    }
}

#[test]
fn calc_prints_a_layout_the_config_accepts() {
    let out = bin().args(["calc", "--batch-size", "8"]).output().unwrap();
    assert!(out.status.success());
    let layout: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(layout["batch_size"], 8);
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 8, 9, work.path(), 1);
    json["layout"] = layout;
    sealer_config::BatchConfig::from_json(&json.to_string()).unwrap();
}

/// `promtool check metrics` on a scrape (naming and type conventions), where promtool is
/// installed (CI installs it; hack/host-deps.sh).
fn promtool_check_metrics(text: &str) {
    use std::io::Write;
    let Ok(mut p) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool not installed: /metrics conventions not checked");
        return;
    };
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    let msg = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && msg.trim().is_empty(), "promtool check metrics:\n{msg}\n{text}");
}

fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn batch_killed_during_pc2_resumes_and_matches_oracle_with_endpoints() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, mut json) = common::config(8 << 20, 6, 2, 701, work.path(), 1);
    let port = 20000 + (std::process::id() % 20000) as u16;
    json["metrics_port"] = port.into();
    let file = ConfigFile::write(work.path().join("batch.json"), &json);
    let progress = work.path().join("out/progress.json");

    let mut child = file
        .seal("batch")
        .env("SEALER_TEST_SLOW_PC2_MS", "1500")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut saw_metrics = false;
    loop {
        if !saw_metrics {
            if let Some(m) = http_get(port, "/metrics") {
                if m.contains("sealer_layer") && m.contains("sealer_hasher_busy_ratio") {
                    promtool_check_metrics(m.split_once("\r\n\r\n").map_or(m.as_str(), |(_, body)| body));
                    // A busy machine can refuse one connection; the next poll retries.
                    if let Some(p) = http_get(port, "/progress") {
                        assert!(p.contains("\"phase\""), "{p}");
                        saw_metrics = true;
                    }
                }
            }
        }
        if let Ok(s) = std::fs::read_to_string(&progress) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&s) {
                if v["phase"] == "pc2" && v["layer_percent"].as_f64().unwrap_or(0.0) > 0.0 {
                    break;
                }
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "sealer exited before the kill");
        assert!(t0.elapsed() < Duration::from_secs(180), "PC2 never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(saw_metrics, "/metrics was not served");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!cfg.output_dir.join("results.json").exists());
    for s in &cfg.sectors {
        assert!(
            !sealer_config::sector_paths(&cfg, s.sector_id).cache.join("p_aux").exists(),
            "p_aux must only appear when complete"
        );
    }

    let out = file.seal("batch").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let res: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cfg.output_dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(res["sectors"], file["sectors"]);
    // The summary says where the threads ran (pinned to this process's CPUs).
    assert!(res["cpus"]["granted"].as_str().is_some_and(|g| !g.is_empty()), "{res}");
    for (i, s) in cfg.sectors.iter().enumerate() {
        let o = sealer_oracle::precommit_sector(&cfg, s, work.path()).unwrap();
        assert_eq!(res["sectors"][i]["comm_r"], hex::encode(o.comm_r));
        assert_eq!(res["sectors"][i]["sector_id"], s.sector_id);
    }
}

/// `capabilities` lists gpu only when the device opens, and says why not otherwise.
#[test]
fn capabilities_list_the_gpu_engine_only_with_a_device() {
    let run = |device: &str| -> serde_json::Value {
        let out = bin().arg("capabilities").env("SEALER_GPU_DEVICE", device).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let with = run("0");
    assert_eq!(with["pc2_engines"], serde_json::json!(["cpu", "gpu"]), "{with}");
    assert_eq!(with["gpu_device"]["index"], 0);
    assert!(!with["opencl_devices"].as_array().unwrap().is_empty());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("capabilities.json");
    let out = bin().args(["capabilities", "--out"]).arg(&file).env("SEALER_GPU_DEVICE", "0").output().unwrap();
    assert!(out.status.success());
    let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["pc2_engines"], with["pc2_engines"]);
    let without = run("999");
    assert_eq!(without["pc2_engines"], serde_json::json!(["cpu"]), "{without}");
    assert!(without["gpu_unavailable"].as_str().unwrap().contains("no OpenCL device 999"), "{without}");
    assert_eq!(with["layer_device_modes"], serde_json::json!(["kernel"]), "no SPDK backend: never vfio");

    // The shape is the operator's contract (contracts/sealer-capabilities.json, which the node
    // agent's tests read): each case writes exactly the keys of its example, devices included.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/sealer-capabilities.json");
    let contract: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    for (got, want) in [(&with, &contract["examples"][0]), (&without, &contract["examples"][1])] {
        assert_eq!(keys(got), keys(want), "capabilities {got}\nagainst the contract's {want}");
    }
    assert_eq!(keys(&with["gpu_device"]), keys(&contract["examples"][0]["gpu_device"]));
    assert_eq!(keys(&with["opencl_devices"][0]), keys(&contract["examples"][0]["opencl_devices"][0]));
}

/// A batch asking for the GPU engine on a device that does not exist fails with exit code 8,
/// naming the device, before it writes an output.
#[test]
fn pc2_on_a_missing_gpu_exits_8() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 1, 5, work.path(), 1);
    json["pc2_engine"] = "gpu".into();
    let cfg = ConfigFile::write(work.path().join("c.json"), &json);
    assert!(cfg.seal("pc1").status().unwrap().success());
    let out = cfg.cmd("pc2", &[]).env("SEALER_GPU_DEVICE", "999").output().unwrap();
    assert_eq!(out.status.code(), Some(8), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no OpenCL device 999"));
    assert!(!work.path().join("out/results.json").exists());
}

/// PC2 stopped mid-tree resumes from its checkpoint, here on the other engine (CPU first, the
/// GPU engine on OpenCL device 0 after): every output byte equals an uninterrupted run's.
#[test]
fn pc2_resumes_from_its_checkpoint_on_either_engine() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, json) = common::config(8 << 20, 6, 1, 907, work.path(), 1);
    let cfg = ConfigFile::write(work.path().join("c.json"), &json);
    assert!(cfg.seal("pc1").status().unwrap().success());
    let out = work.path().join("out");
    // The uninterrupted run, kept aside.
    assert!(cfg.cmd("pc2", &["--no-layer-files"]).status().unwrap().success());
    // Its sector directory moves aside; PC1's state stays in the output directory.
    let sector_dir = out.join(json["sectors"][0]["sector_id"].as_u64().unwrap().to_string());
    let whole = work.path().join("whole");
    std::fs::rename(&sector_dir, &whole).unwrap();
    std::fs::remove_file(out.join("results.json")).unwrap();
    // Stopped after 2 of its 4 ranges: a checkpoint, nothing final.
    let stopped = cfg.cmd("pc2", &["--no-layer-files"]).env("SEALER_TEST_PC2_STOP_AFTER_RANGES", "2").output().unwrap();
    assert_eq!(stopped.status.code(), Some(1), "{}", String::from_utf8_lossy(&stopped.stderr));
    assert!(out.join("pc2-checkpoint.json").exists() && !out.join("results.json").exists());
    // Resumed on the GPU engine.
    let mut gpu_json = json.clone();
    gpu_json["pc2_engine"] = "gpu".into();
    let gpu_cfg = ConfigFile::write(work.path().join("g.json"), &gpu_json);
    let resumed = gpu_cfg.cmd("pc2", &["--no-layer-files"]).env("SEALER_GPU_DEVICE", "0").output().unwrap();
    let log = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{log}");
    assert!(log.contains("PC2 resumes at base tree 1 of 1, node 131072"), "{log}");
    let res: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert!(res["timings"].is_null(), "`pc2` alone reports no timings: {res}");
    assert!(!out.join("pc2-checkpoint.json").exists(), "checkpoint left after PC2 completed");
    assert_same_outputs(&whole, &sector_dir);
}

/// Every file under `a` and `b` (but results.json and t_aux, which name their directory) is
/// the same, byte for byte: a resumed PC2's outputs against an uninterrupted run's.
fn assert_same_outputs(a: &Path, b: &Path) {
    let rel = |root: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let mut files = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if !p.ends_with("results.json") && !p.ends_with("t_aux") {
                    files.push((p.strip_prefix(root).unwrap().to_path_buf(), std::fs::read(&p).unwrap()));
                }
            }
        }
        files.sort();
        files
    };
    let (a, b) = (rel(a), rel(b));
    assert!(a.len() >= 5, "outputs compared: {:?}", a.iter().map(|f| &f.0).collect::<Vec<_>>());
    assert_eq!(a.iter().map(|f| &f.0).collect::<Vec<_>>(), b.iter().map(|f| &f.0).collect::<Vec<_>>());
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x == y, "{} differs after the resume", name.display());
    }
}

/// The GPU engine writes a range while it hashes the next, so a GPU run stopped mid-PC2 has
/// hashed one range more than its files hold: its checkpoint must say where the files end, and
/// the CPU engine resumed from there must write what an uninterrupted run writes.
#[test]
fn a_gpu_run_stopped_mid_pc2_resumes_where_its_files_end() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, json) = common::config(8 << 20, 6, 1, 911, work.path(), 1);
    let cfg = ConfigFile::write(work.path().join("c.json"), &json);
    assert!(cfg.seal("pc1").status().unwrap().success());
    let out = work.path().join("out");
    assert!(cfg.cmd("pc2", &["--no-layer-files"]).status().unwrap().success());
    let sector_dir = out.join(json["sectors"][0]["sector_id"].as_u64().unwrap().to_string());
    let whole = work.path().join("whole");
    std::fs::rename(&sector_dir, &whole).unwrap();
    std::fs::remove_file(out.join("results.json")).unwrap();
    // The CPU engine's ranges (4 of 65536 nodes) set the resumed runs' ranges.
    let stop = |c: &ConfigFile, ranges: &str, gpu: bool| {
        let mut cmd = c.cmd("pc2", &["--no-layer-files"]);
        cmd.env("SEALER_TEST_PC2_STOP_AFTER_RANGES", ranges);
        if gpu {
            // One range at a time: range 3 is hashed while range 2 is written.
            cmd.env("SEALER_GPU_DEVICE", "0").env("SEALER_TEST_GPU_IN_FLIGHT", "1");
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    stop(&cfg, "1", false);
    let mut gpu_json = json.clone();
    gpu_json["pc2_engine"] = "gpu".into();
    let gpu_cfg = ConfigFile::write(work.path().join("g.json"), &gpu_json);
    // Ranges 2 and 3 hashed on the GPU engine, only range 2 written when it stops.
    let log = stop(&gpu_cfg, "2", true);
    assert!(log.contains("PC2 resumes at base tree 1 of 1, node 65536"), "{log}");
    let resumed = cfg.cmd("pc2", &["--no-layer-files"]).output().unwrap();
    let log = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{log}");
    assert!(log.contains("PC2 resumes at base tree 1 of 1, node 131072"), "{log}");
    assert_same_outputs(&whole, &sector_dir);
}

/// PC2 on the GPU engine with 2 and 3 ranges on the device at once (one at a time: the test
/// above) writes, byte for byte,
/// what the CPU engine writes (a CC and a data sector of 8 MiB, in ranges of 2^16 and 2^17
/// nodes: the larger has a tree-r-last level the device never sends back); a GPU run stopped
/// with ranges in flight resumes from where its files end. A device that hashes wrongly
/// (a spoiled column or tree node, injected) fails PC2 with exit 8, naming the range, before
/// any output is renamed into place.
#[test]
fn pc2_with_ranges_in_flight_writes_what_the_cpu_writes_and_refuses_a_wrong_device() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(8 << 20, 6, 2, common::random_seed("pc2_ranges_in_flight"), work.path(), 1);
    let piece = work.path().join("piece");
    std::fs::write(&piece, (0..300_000u32).map(|j| (j * 13 + 5) as u8).collect::<Vec<_>>()).unwrap();
    let staged = work.path().join("staged");
    let pieces = sealer_data::stage(8 << 20, &[piece.as_path()], &staged).unwrap();
    json["sectors"][1]["data"] = serde_json::json!({"path": staged.to_str().unwrap(),
        "pieces": pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>()});
    let cpu = ConfigFile::write(work.path().join("cpu.json"), &json);
    json["pc2_engine"] = "gpu".into();
    let gpu = ConfigFile::write(work.path().join("gpu.json"), &json);
    assert!(cpu.seal("pc1").status().unwrap().success());
    let out = work.path().join("out");
    let ids: Vec<u64> = json["sectors"].as_array().unwrap().iter().map(|s| s["sector_id"].as_u64().unwrap()).collect();
    let pc2 = |cfg: &ConfigFile, env: &[(&str, &str)]| {
        let mut c = cfg.cmd("pc2", &["--no-layer-files"]);
        c.envs(env.iter().copied());
        c.output().unwrap()
    };
    let take = |name: &str| {
        let kept = work.path().join(name);
        std::fs::create_dir_all(&kept).unwrap();
        for id in &ids {
            std::fs::rename(out.join(id.to_string()), kept.join(id.to_string())).unwrap();
        }
        std::fs::remove_file(out.join("results.json")).unwrap();
        kept
    };
    let o = pc2(&cpu, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let on_cpu = take("cpu");
    // One in flight: a_gpu_run_stopped_mid_pc2_resumes_where_its_files_end. Two in flight on
    // 65536-node ranges runs below, stopped and resumed; whole with 131072.
    for (range, flight) in [("65536", "3"), ("131072", "2")] {
        let o = pc2(&gpu, &[("SEALER_TEST_GPU_RANGE", range), ("SEALER_TEST_GPU_IN_FLIGHT", flight)]);
        let log = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{log}");
        assert!(
            log.contains(&format!(
                "PC2 ranges of {range} nodes, each split among 1 of 1 devices, {flight} on each at once"
            )),
            "{log}"
        );
        let on_gpu = take(&format!("gpu-{range}-{flight}"));
        assert_same_outputs(&on_cpu, &on_gpu);
        std::fs::remove_dir_all(on_gpu).unwrap();
    }
    // Stopped after 3 of 4 ranges with 2 in flight: range 1 written, ranges 2 and 3 hashing.
    // The CPU engine resumes from the end of range 1 and writes what an uninterrupted run
    // writes.
    let env = [
        ("SEALER_TEST_GPU_RANGE", "65536"),
        ("SEALER_TEST_GPU_IN_FLIGHT", "2"),
        ("SEALER_TEST_PC2_STOP_AFTER_RANGES", "3"),
    ];
    let o = pc2(&gpu, &env);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let o = pc2(&cpu, &[]);
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && log.contains("PC2 resumes at base tree 1 of 1, node 65536"), "{log}");
    assert_same_outputs(&on_cpu, &take("resumed"));
    // A device that hashes wrongly: exit 8 naming the range, nothing renamed into place.
    for spoil in ["columns", "tree"] {
        let o = pc2(&gpu, &[("SEALER_TEST_GPU_RANGE", "65536"), ("SEALER_TEST_GPU_SPOIL", spoil)]);
        let log = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(8), "{spoil}: {log}");
        assert!(log.contains("PC2's range of nodes 0..65536 on") && log.contains("hashed wrongly"), "{spoil}: {log}");
        assert!(!out.join("results.json").exists());
        for id in &ids {
            assert!(
                !out.join(id.to_string()).join("sealed").exists(),
                "{spoil}: sector {id}'s replica renamed into place"
            );
        }
        assert!(!out.join("pc2-checkpoint.json").exists(), "{spoil}: a checkpoint left after exit 8");
    }
    // A device that fails its check also drops the checkpoint its run resumed from: the
    // retry must not resume over rows a faulty device may have written.
    let o = pc2(&cpu, &[("SEALER_TEST_PC2_STOP_AFTER_RANGES", "2")]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join("pc2-checkpoint.json").exists());
    let o = pc2(&gpu, &[("SEALER_TEST_GPU_RANGE", "65536"), ("SEALER_TEST_GPU_SPOIL", "columns")]);
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(8), "{log}");
    assert!(log.contains("PC2 resumes at base tree 1 of 1, node 131072"), "{log}");
    assert!(!out.join("pc2-checkpoint.json").exists(), "the checkpoint survived exit 8: {log}");
}

/// PC2 on two OpenCL devices (pocl's CPU device listed twice) splits each range's rows between
/// them and writes, byte for byte, what the CPU engine writes: a batch of four 2 KiB sectors,
/// two with deal data.
#[test]
fn pc2_on_two_devices_writes_what_one_engine_writes() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 4, common::random_seed("pc2_on_two_devices"), work.path(), 1);
    for i in [1usize, 3] {
        let piece = work.path().join(format!("piece-{i}"));
        std::fs::write(&piece, (0..1200u32).map(|j| (j * 31 + i as u32 * 7) as u8).collect::<Vec<_>>()).unwrap();
        let staged = work.path().join(format!("staged-{i}"));
        let pieces = sealer_data::stage(2048, &[piece.as_path()], &staged).unwrap();
        json["sectors"][i]["data"] = serde_json::json!({"path": staged.to_str().unwrap(),
            "pieces": pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>()});
    }
    let cpu = ConfigFile::write(work.path().join("cpu.json"), &json);
    json["pc2_engine"] = "gpu".into();
    let two = ConfigFile::write(work.path().join("two.json"), &json);
    assert!(cpu.seal("pc1").status().unwrap().success());
    let out = work.path().join("out");
    let run = |cfg: &ConfigFile, devices: Option<&str>| -> Vec<(PathBuf, Vec<u8>)> {
        let mut c = cfg.cmd("pc2", &["--no-layer-files"]);
        if let Some(d) = devices {
            c.env("POCL_DEVICES", "pthread pthread").env("SEALER_GPU_DEVICES", d);
        }
        let o = c.output().unwrap();
        let log = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{log}");
        if devices.is_some() {
            assert!(log.contains("PC2 on OpenCL device 0") && log.contains("PC2 on OpenCL device 1"), "{log}");
            assert!(log.contains("PC2 ranges of 64 nodes, each split among 2 of 2 devices"), "{log}");
        }
        let mut files = Vec::new();
        for id in json["sectors"].as_array().unwrap().iter().map(|s| s["sector_id"].as_u64().unwrap()) {
            let dir = out.join(id.to_string());
            for name in [
                "sealed",
                "cache/sc-02-data-tree-c.dat",
                "cache/sc-02-data-tree-r-last.dat",
                "cache/sc-02-data-tree-d.dat",
                "cache/p_aux",
            ] {
                files.push((dir.join(name), std::fs::read(dir.join(name)).unwrap()));
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
        std::fs::remove_file(out.join("results.json")).unwrap();
        files
    };
    let on_two = run(&two, Some("0,1"));
    let on_cpu = run(&cpu, None);
    assert_eq!(on_two.len(), on_cpu.len());
    for ((name, a), (_, b)) in on_two.iter().zip(&on_cpu) {
        assert!(a == b, "{} differs between two devices and the CPU engine", name.display());
    }
    // A device list that is not indices is refused, naming the variable.
    let o = two.cmd("pc2", &[]).env("SEALER_GPU_DEVICES", "0,x").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("SEALER_GPU_DEVICES"));
}

/// The GPU engine's kernels check themselves against neptune before their first use: with a
/// wrong round constant on the device (a test hook) PC2 refuses the device, exit 8, naming it
/// and the hash that differed, and writes no results.
#[test]
fn a_gpu_whose_kernels_hash_wrongly_is_refused() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 1, 917, work.path(), 1);
    json["pc2_engine"] = "gpu".into();
    let cfg = ConfigFile::write(work.path().join("c.json"), &json);
    assert!(cfg.seal("pc1").status().unwrap().success());
    let out =
        cfg.cmd("pc2", &[]).env("SEALER_GPU_DEVICE", "0").env("SEALER_TEST_GPU_BAD_CONSTANT", "1").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(
        err.contains("hash wrongly on") && err.contains("where neptune gives") && err.contains("the device is refused"),
        "{err}"
    );
    assert!(!work.path().join("out/results.json").exists());
    // The same device with its true constants seals.
    let out = cfg.cmd("pc2", &[]).env("SEALER_GPU_DEVICE", "0").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A sector given up in the middle of PC2 stays given up across a resume and on the GPU
/// engine: a data sector's staged file gets a node that is not a field element after PC1, in
/// PC2's second range; PC2 on the CPU stops after two ranges, resumes on the GPU engine, and
/// the CC sector beside it comes out byte for byte as a clean run made it; then PC2 again from
/// the start on the GPU engine finds the bad node itself, with the same outcome.
#[test]
fn a_sector_given_up_mid_pc2_stays_given_up_across_a_resume_and_on_the_gpu() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let size = 8u64 << 20;
    let (_, mut json) = common::config(size, 6, 2, 911, work.path(), 1);
    let piece = work.path().join("piece");
    std::fs::write(&piece, (0..3u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<_>>())
        .unwrap();
    let staged = work.path().join("staged");
    let pieces = sealer_data::stage(size, &[piece.as_path()], &staged).unwrap();
    json["sectors"][1]["data"] = serde_json::json!({"path": staged.to_str().unwrap(),
        "pieces": pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>()});
    let cpu = ConfigFile::write(work.path().join("c.json"), &json);
    let mut gpu_json = json.clone();
    gpu_json["pc2_engine"] = "gpu".into();
    let gpu = ConfigFile::write(work.path().join("g.json"), &gpu_json);
    assert!(cpu.seal("pc1").status().unwrap().success());
    let out = work.path().join("out");
    let ids: Vec<u64> = (0..2).map(|i| json["sectors"][i]["sector_id"].as_u64().unwrap()).collect();
    let (cc_dir, data_dir) = (out.join(ids[0].to_string()), out.join(ids[1].to_string()));
    // The clean run: the CC sector's outputs, kept aside.
    assert!(cpu.cmd("pc2", &["--no-layer-files"]).status().unwrap().success());
    let clean = work.path().join("clean");
    std::fs::rename(&cc_dir, &clean).unwrap();
    std::fs::remove_dir_all(&data_dir).unwrap();
    std::fs::remove_file(out.join("results.json")).unwrap();
    // Node 70000 (the second of four ranges) of the data sector is no field element now.
    let f = std::fs::OpenOptions::new().write(true).open(&staged).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[0xff; 32], 70000 * 32).unwrap();

    let check = |res: &[u8], log: &str| {
        let res: serde_json::Value = serde_json::from_slice(res).unwrap_or_else(|e| panic!("{e}: {log}"));
        let given_up = res["sectors"].as_array().unwrap().iter().find(|e| e["sector_id"] == ids[1]).unwrap();
        assert_eq!(given_up["failure_class"], "data-mismatch", "{res}");
        let why = given_up["failed"].as_str().unwrap();
        assert!(why.contains(staged.to_str().unwrap()) && why.contains("node 70000"), "{why}");
        for name in ["sealed", "sealed.tmp", "cache"] {
            assert!(!data_dir.join(name).exists(), "{name} of the given-up sector was kept");
        }
        for name in ["sealed", "cache/sc-02-data-tree-r-last.dat", "cache/sc-02-data-tree-c.dat", "cache/p_aux"] {
            assert!(
                std::fs::read(clean.join(name)).unwrap() == std::fs::read(cc_dir.join(name)).unwrap(),
                "{name} of the CC sector differs from the clean run's"
            );
        }
    };
    let stopped = cpu.cmd("pc2", &["--no-layer-files"]).env("SEALER_TEST_PC2_STOP_AFTER_RANGES", "2").output().unwrap();
    assert_eq!(stopped.status.code(), Some(1), "{}", String::from_utf8_lossy(&stopped.stderr));
    let cp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("pc2-checkpoint.json")).unwrap()).unwrap();
    assert_eq!(cp["lost"][0]["sector_id"], ids[1], "{cp}");
    let resumed = gpu.cmd("pc2", &["--no-layer-files"]).env("SEALER_GPU_DEVICE", "0").output().unwrap();
    let log = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{log}");
    assert!(log.contains("PC2 resumes at base tree 1 of 1, node 131072"), "{log}");
    check(&resumed.stdout, &log);

    std::fs::remove_dir_all(&cc_dir).unwrap();
    std::fs::remove_file(out.join("results.json")).unwrap();
    let fresh = gpu.cmd("pc2", &["--no-layer-files"]).env("SEALER_GPU_DEVICE", "0").output().unwrap();
    let log = String::from_utf8_lossy(&fresh.stderr);
    assert!(fresh.status.success(), "{log}");
    assert!(!log.contains("PC2 resumes"), "{log}");
    check(&fresh.stdout, &log);
}

/// `qualify` on an 8 MiB file with a write range over its second MiB: the figures are there,
/// the document is on stdout, in --out, in the termination message and on the stderr line,
/// and every byte outside the range is as it was.
#[test]
fn qualify_measures_a_file_and_writes_only_inside_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("layer.img");
    let before: Vec<u8> = (0..8usize << 20).map(|i| (i * 13 + i / 4096) as u8).collect();
    std::fs::write(&dev, &before).unwrap();
    let (out_file, term) = (dir.path().join("qualification.json"), dir.path().join("termination-log"));
    let out = bin()
        .arg("qualify")
        .arg("--device")
        .arg(&dev)
        .args(["--write-range", "1048576:1048576", "--seconds", "0.3", "--hugepages-probe", "0", "--threads", "1"])
        .arg("--out")
        .arg(&out_file)
        .env("SEALER_TERMINATION_LOG", &term)
        .env("SEALER_GPU_DEVICE", "999")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &doc["devices"][0];
    assert!(d["error"].is_null() && d["write_skipped"].is_null(), "{doc}");
    assert!(d["random_read_iops"].as_f64().unwrap() > 0.0, "{doc}");
    assert!(d["seq_read_bytes_per_s"].as_f64().unwrap() > 0.0, "{doc}");
    assert!(d["seq_write_bytes_per_s"].as_f64().unwrap() > 0.0, "{doc}");
    assert_eq!(d["bytes"], 8 << 20);
    assert!(doc["hashing"]["labels_per_s_per_thread"].as_f64().unwrap() > 0.0, "{doc}");
    assert_eq!(doc["hugepages_1gi"]["probed"], 0);
    assert!(doc["memory_copy_bytes_per_s"].as_f64().unwrap() > 0.0, "{doc}");
    assert!(doc["gpu"].is_null(), "no OpenCL device 999: {doc}");
    assert_eq!(doc["tool"], format!("sealer {}", env!("CARGO_PKG_VERSION")));
    let line = stderr.lines().find_map(|l| l.strip_prefix("SEALER_QUALIFICATION ")).expect("the stderr line");
    assert_eq!(serde_json::from_str::<serde_json::Value>(line).unwrap(), doc);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&std::fs::read(&out_file).unwrap()).unwrap(), doc);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&std::fs::read(&term).unwrap()).unwrap(), doc);

    let after = std::fs::read(&dev).unwrap();
    assert_eq!(after.len(), before.len(), "the file changed size");
    assert!(after[..1 << 20] == before[..1 << 20], "the first MiB changed");
    assert!(after[2 << 20..] == before[2 << 20..], "bytes after the range changed");
    assert!(after[1 << 20..2 << 20] != before[1 << 20..2 << 20], "nothing was written in the range");
}

/// Without a range nothing is written and each device says why; a device that cannot be
/// measured is an error in the document, not a failed command; a bad range is refused (exit
/// 2) naming the flag, before anything is measured.
#[test]
fn qualify_reports_skips_and_device_errors_and_refuses_bad_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("layer.img");
    std::fs::write(&dev, vec![7u8; 1 << 20]).unwrap();
    let missing = dir.path().join("missing.img");
    let out = bin()
        .arg("qualify")
        .arg("--device")
        .arg(&dev)
        .arg("--device")
        .arg(&missing)
        .args(["--no-write-reason", "no free slot to write in", "--seconds", "0.1", "--hugepages-probe", "0"])
        .args(["--threads", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["devices"][0]["write_skipped"], "no free slot to write in", "{doc}");
    assert!(doc["devices"][0]["seq_write_bytes_per_s"].is_null() && doc["devices"][0]["error"].is_null(), "{doc}");
    assert!(doc["devices"][1]["error"].as_str().unwrap().contains("No such file"), "{doc}");
    assert!(!missing.exists(), "qualify created a device");
    assert_eq!(std::fs::read(&dev).unwrap(), vec![7u8; 1 << 20]);

    for bad in ["1048576", "100:4096", "0:0", "x:4096"] {
        let out = bin().args(["qualify", "--write-range", bad]).arg("--device").arg(&dev).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--write-range") && stderr.contains("OFFSET:LENGTH"), "{bad}: {stderr}");
        assert!(out.stdout.is_empty(), "{bad}: measured anyway");
    }
}

/// `bench pc2-io` at a small size (three layer files, a slot offset, PC2 on the CPU engine):
/// it runs, and its JSON document has its keys. Its speed is the benchmark's to report.
#[test]
fn bench_pc2_io_runs_and_reports_its_keys() {
    let work = tempfile::tempdir().unwrap();
    let json = work.path().join("io.json");
    let o = bin()
        .args(["bench", "pc2-io", "--sector-size", "8MiB", "--batch", "2", "--layer-files", "3"])
        .args(["--slot-offset-mib", "1", "--request-kib", "256,1024", "--rounds", "1", "--hashing", "none"])
        .arg("--dir")
        .arg(work.path())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for k in
        ["sector_size_bytes", "slot_bytes", "slot_offset_bytes", "layer_files", "range_nodes", "fio", "reads", "writes"]
    {
        assert!(!v[k].is_null(), "no {k} in {v}");
    }
    assert_eq!((v["layer_files"].as_u64(), v["slot_offset_bytes"].as_u64()), (Some(3), Some(1 << 20)));
    // Every layer of both sectors, whatever the request size.
    let slot = 2 * 2 * (8u64 << 20);
    let ours: Vec<&serde_json::Value> =
        v["reads"].as_array().unwrap().iter().filter(|r| r["what"].as_str().unwrap().starts_with("sealer")).collect();
    assert_eq!(ours.len(), 2);
    for r in ours.iter().copied().chain(v["writes"].as_array().unwrap().iter().take(1)) {
        for k in ["request_bytes", "depth", "bytes", "bytes_per_s", "cpu_s_per_gb"] {
            assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{k} in {r}");
        }
    }
    assert!(ours.iter().all(|r| r["bytes"].as_u64() == Some(slot)), "{v}");
    // fio's rows, with their ratios, where fio is installed; its absence said, never a figure.
    if v["fio"].as_str().unwrap().starts_with("not run") {
        assert!(v["reads"].as_array().unwrap().iter().all(|r| !r["what"].as_str().unwrap().starts_with("fio")));
    } else {
        assert!(ours.iter().all(|r| r["vs_fio_1mib"].as_f64().is_some_and(|x| x > 0.0)), "{v}");
    }
    // A request cap below 256 KiB is refused by name.
    let o = bin()
        .args(["bench", "pc2-io", "--sector-size", "2KiB", "--request-kib", "4", "--dir"])
        .arg(work.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--request-kib") && e.contains("at least 256 KiB"), "{e}");
}

/// A PC2 stopped with a checkpoint, and sealer outputs for `json` as an uninterrupted run
/// writes them (kept aside under `whole`): the start of the crash-safety cases below.
fn pc2_stopped_beside_a_whole_run(json: &serde_json::Value, work: &Path, stop_after: &str) -> (ConfigFile, PathBuf) {
    let cfg = ConfigFile::write(work.join("c.json"), json);
    assert!(cfg.seal("pc1").status().unwrap().success());
    let out = work.join("out");
    assert!(cfg.cmd("pc2", &["--no-layer-files"]).status().unwrap().success());
    let whole = work.join("whole");
    std::fs::create_dir_all(&whole).unwrap();
    for s in json["sectors"].as_array().unwrap() {
        let id = s["sector_id"].as_u64().unwrap().to_string();
        std::fs::rename(out.join(&id), whole.join(&id)).unwrap();
    }
    std::fs::remove_file(out.join("results.json")).unwrap();
    let stopped =
        cfg.cmd("pc2", &["--no-layer-files"]).env("SEALER_TEST_PC2_STOP_AFTER_RANGES", stop_after).output().unwrap();
    assert_eq!(stopped.status.code(), Some(1), "{}", String::from_utf8_lossy(&stopped.stderr));
    assert!(out.join("pc2-checkpoint.json").exists());
    (cfg, whole)
}

/// Issue 60's reproduction: a checkpoint is rightly ignored because one sector's replica is
/// gone; the run that starts afresh is killed before its own first checkpoint; the run after
/// must not resume from the stale checkpoint over the rows the killed run never wrote. It
/// ends byte-identical to an uninterrupted run (itself equal to filecoin-proofs' in the
/// oracle tests).
#[test]
fn a_rejected_pc2_checkpoint_is_deleted_before_the_fresh_run_writes() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, json) = common::config(8 << 20, 6, 2, common::random_seed("rejected_checkpoint"), work.path(), 1);
    let (cfg, whole) = pc2_stopped_beside_a_whole_run(&json, work.path(), "3");
    let out = work.path().join("out");
    let first = json["sectors"][0]["sector_id"].as_u64().unwrap().to_string();
    std::fs::remove_file(out.join(&first).join("sealed.tmp")).unwrap();
    // Killed as it was about to save its first checkpoint, after one range.
    let killed = cfg
        .cmd("pc2", &["--no-layer-files"])
        .env("SEALER_TEST_PC2_STOP_AFTER_RANGES", "4")
        .env("SEALER_TEST_CRASH_AT", "pc2.checkpoint:1")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&killed.stderr);
    assert_eq!(killed.status.code(), Some(137), "{log}");
    assert!(log.contains("ignored and deleted") && log.contains("sealed.tmp"), "{log}");
    assert!(!out.join("pc2-checkpoint.json").exists(), "the stale checkpoint outlived the run that rejected it");
    let resumed = cfg.cmd("pc2", &["--no-layer-files"]).output().unwrap();
    let log = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{log}");
    assert!(!log.contains("PC2 resumes"), "{log}");
    assert_same_outputs(&whole, &out_sectors(&json, &out, work.path()));
}

/// Rows a checkpoint covers that are no longer what was synced (a file replaced, rows zeroed
/// as lost writes leave them, a tree truncated and grown again) fail the resume's sampled
/// digests: the checkpoint is deleted, PC2 starts afresh and ends byte-identical.
#[test]
fn a_pc2_checkpoint_over_changed_rows_is_not_trusted() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, json) = common::config(8 << 20, 6, 1, common::random_seed("changed_rows"), work.path(), 1);
    let (cfg, whole) = pc2_stopped_beside_a_whole_run(&json, work.path(), "3");
    let out = work.path().join("out");
    let id = json["sectors"][0]["sector_id"].as_u64().unwrap().to_string();
    let dir = out.join(&id);
    // The rows of the second range of the replica read as zeros again, its size unchanged.
    let replica = std::fs::OpenOptions::new().write(true).open(dir.join("sealed.tmp")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&replica, &vec![0u8; 65536 * 32], 65536 * 32).unwrap();
    drop(replica);
    let resumed = cfg.cmd("pc2", &["--no-layer-files"]).output().unwrap();
    let log = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{log}");
    assert!(log.contains("is not what it was at the checkpoint") && !log.contains("PC2 resumes"), "{log}");
    assert_same_outputs(&whole, &out_sectors(&json, &out, work.path()));
    // Stopped again; tree-c's file cut short and grown back to its size.
    let stopped = cfg.cmd("pc2", &["--no-layer-files"]).env("SEALER_TEST_PC2_STOP_AFTER_RANGES", "2").output().unwrap();
    assert_eq!(stopped.status.code(), Some(1));
    let tree_c = dir.join("cache/sc-02-data-tree-c.dat.tmp");
    let len = std::fs::metadata(&tree_c).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&tree_c).unwrap();
    f.set_len(1024).unwrap();
    f.set_len(len).unwrap();
    drop(f);
    let resumed = cfg.cmd("pc2", &["--no-layer-files"]).output().unwrap();
    let log = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success() && log.contains("tree-c.dat.tmp is not what it was"), "{log}");
    assert_same_outputs(&whole, &out_sectors(&json, &out, work.path()));
}

/// A checkpoint whose fields do not fit the batch (roots that are not field elements, a
/// misaligned next node, a base tree past the last) is refused and deleted, never resumed
/// from and never a panic.
#[test]
fn a_pc2_checkpoint_with_fields_that_do_not_fit_is_refused() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, json) = common::config(8 << 20, 6, 1, common::random_seed("bad_fields"), work.path(), 1);
    let (cfg, whole) = pc2_stopped_beside_a_whole_run(&json, work.path(), "2");
    let out = work.path().join("out");
    let path = out.join("pc2-checkpoint.json");
    let good: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    // Each edit, and the words its refusal says.
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 6] = [
        ("is not a range start", |c| c["next"] = (c["next"].as_u64().unwrap() + 8).into()),
        ("at base tree 8 of 1", |c| c["k"] = 7.into()),
        ("pending node is not a field element", |c| {
            c["tc"][0]["pending"][1] = serde_json::json!([hex::encode([0xffu8; 32])])
        }),
        ("is not a field element", |c| c["roots_c"][0] = serde_json::json!([hex::encode([0xffu8; 32])])),
        ("finished base trees", |c| c["roots_c"][0] = serde_json::json!([hex::encode([1u8; 32])])),
        ("lists replica of 0 sectors", |c| c["replica"] = serde_json::json!([])),
    ];
    for (what, edit) in edits {
        let mut c = good.clone();
        edit(&mut c);
        std::fs::write(&path, c.to_string()).unwrap();
        let o = cfg.cmd("pc2", &["--no-layer-files"]).env("SEALER_TEST_PC2_STOP_AFTER_RANGES", "1").output().unwrap();
        let log = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {log}");
        assert!(
            log.contains("ignored and deleted") && log.contains(what) && !log.contains("PC2 resumes"),
            "{what}: {log}"
        );
    }
    std::fs::write(&path, good.to_string()).unwrap();
    let o = cfg.cmd("pc2", &["--no-layer-files"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{log}");
    assert_same_outputs(&whole, &out_sectors(&json, &out, work.path()));
}

/// PC2 over layer storage that is gone or cut short fails as storage (exit 3, naming the
/// file), not as "run PC1 first" (exit 2), and never reads the missing tail as zeros.
#[test]
fn pc2_over_missing_or_truncated_layer_storage_is_a_storage_error() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, json) = common::config(2048, 5, 1, 11, work.path(), 2);
    let cfg = ConfigFile::write(work.path().join("c.json"), &json);
    assert!(cfg.seal("pc1").status().unwrap().success());
    let dev1 = work.path().join("dev1.img");
    let len = std::fs::metadata(&dev1).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&dev1).unwrap().set_len(len - 4096).unwrap();
    let o = cfg.cmd("pc2", &["--no-layer-files"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{log}");
    assert!(log.contains("dev1.img") && log.contains("truncated"), "{log}");
    std::fs::remove_file(&dev1).unwrap();
    let o = cfg.cmd("pc2", &["--no-layer-files"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{log}");
    assert!(log.contains("dev1.img") && !log.contains("run `sealer pc1` first"), "{log}");
}

/// The sector directories of `json` moved from `out` to a fresh directory under `work`, and
/// results.json removed: what [`assert_same_outputs`] compares with an uninterrupted run.
fn out_sectors(json: &serde_json::Value, out: &Path, work: &Path) -> PathBuf {
    let kept = tempfile::tempdir_in(work).unwrap().keep();
    for s in json["sectors"].as_array().unwrap() {
        let id = s["sector_id"].as_u64().unwrap().to_string();
        std::fs::rename(out.join(&id), kept.join(&id)).unwrap();
    }
    std::fs::remove_file(out.join("results.json")).unwrap();
    kept
}

/// Runs `sealer pc2` on `cfg` with the audit's seed fixed and `spoil` (if any) flipping one
/// byte of the first sector's outputs before the audit reads them; the first sector must be
/// failed by the audit (class `audit`, its files deleted) and the second sealed.
fn assert_audit_fails_the_first_sector(cfg: &ConfigFile, json: &serde_json::Value, spoil: Option<&str>, why: &str) {
    let mut c = cfg.cmd("pc2", &["--no-layer-files"]);
    c.env(sealer_proofs::audit::SEED_ENV, "5");
    if let Some(s) = spoil {
        c.env(sealer_proofs::audit::SPOIL_ENV, s);
    }
    let o = c.output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{spoil:?}: {log}");
    let res: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cfg = sealer_config::BatchConfig::from_json(&json.to_string()).unwrap();
    let (first, second) = (cfg.sectors[0].sector_id, cfg.sectors[1].sector_id);
    let entry = |id: u64| res["sectors"].as_array().unwrap().iter().find(|e| e["sector_id"] == id).cloned().unwrap();
    let failed = entry(first);
    assert_eq!(failed["failure_class"], "audit", "{spoil:?}: {res}\n{log}");
    // `why`: the words the failure says, alternatives separated by `|`.
    let said = failed["failed"].as_str().unwrap();
    assert!(why.split('|').any(|w| said.contains(w)), "{spoil:?}: {failed}");
    let p = sealer_config::sector_paths(&cfg, first);
    assert!(!p.sealed.exists() && !p.cache.exists(), "{spoil:?}: the audited-out sector's files were kept");
    assert!(entry(second)["comm_r"].is_string(), "{spoil:?}: {res}");
    assert!(sealer_config::sector_paths(&cfg, second).cache.join("p_aux").exists());
    // Ready for the next case: the sealed sector's outputs go too.
    std::fs::remove_dir_all(cfg.output_dir.join(second.to_string())).unwrap();
    std::fs::remove_file(cfg.output_dir.join("results.json")).unwrap();
}

/// Every sector answers WindowPoSt challenges and spot checks before it leaves PC2: one bit
/// flipped in the replica, in tree-r-last or in tree-c between PC2's writes and the audit
/// fails that sector (class `audit`, files deleted) and not the other, on either engine.
#[test]
fn the_audit_catches_a_flipped_bit_in_each_output_on_either_engine() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 2, common::random_seed("audit_outputs"), work.path(), 1);
    let cpu = ConfigFile::write(work.path().join("cpu.json"), &json);
    assert!(cpu.seal("pc1").status().unwrap().success());
    json["pc2_engine"] = "gpu".into();
    let gpu = ConfigFile::write(work.path().join("gpu.json"), &json);
    for (engine, cfg) in [("cpu", &cpu), ("gpu", &gpu)] {
        for (spoil, why) in [
            // The PoSt challenge flipped may also be a spot-checked node.
            ("replica", "WindowPoSt|the replica's node"),
            ("tree-r-last", "WindowPoSt"),
            ("tree-c", "tree-c's leaf"),
        ] {
            eprintln!("{engine}: {spoil}");
            assert_audit_fails_the_first_sector(cfg, &json, Some(spoil), why);
        }
    }
}

/// A label flipped in the slot after PC1 and before PC2 makes outputs that agree with each
/// other and with their CommR; only recomputing the label from its parents shows it. The
/// audit's spot check does, at its first node.
#[test]
fn the_audit_catches_a_layer_damaged_before_pc2() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, json) = common::config(8 << 20, 6, 2, common::random_seed("audit_layer"), work.path(), 1);
    let file = ConfigFile::write(work.path().join("c.json"), &json);
    assert!(file.seal("pc1").status().unwrap().success());
    let g = sealer_slot::geometry(&cfg, sealer_slot::Tuning::default());
    let v = sealer_proofs::audit::spot_nodes(&sealer_proofs::audit::seed_of(5), g.nodes)[0];
    let (dev, off) = sealer_slot::stripe(&cfg, &g).locate(2, v / g.npp);
    let at = off + (v % g.npp) * g.row as u64;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&cfg.layers.paths[dev]).unwrap();
    let mut b = [0u8; 1];
    std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, at).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[b[0] ^ 1], at).unwrap();
    drop(f);
    assert_audit_fails_the_first_sector(&file, &json, None, &format!("layer 2's label at node {v} does not match"));
}

/// A label that is not a field element (a damaged layer page PC1's digests did not sample)
/// gives its sector up with a reason, never a panic (exit 101, which the operator retries
/// without end); the other sector is sealed.
#[test]
fn a_label_that_is_not_a_field_element_fails_its_sector_not_the_run() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, json) = common::config(8 << 20, 6, 2, common::random_seed("bad_label"), work.path(), 1);
    let file = ConfigFile::write(work.path().join("c.json"), &json);
    assert!(file.seal("pc1").status().unwrap().success());
    let g = sealer_slot::geometry(&cfg, sealer_slot::Tuning::default());
    // Page 100 of layer 1: not one of the pages the resume digests sample.
    let v = 100 * g.npp + 3;
    let (dev, off) = sealer_slot::stripe(&cfg, &g).locate(1, v / g.npp);
    let f = std::fs::OpenOptions::new().write(true).open(&cfg.layers.paths[dev]).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[0xff; 32], off + (v % g.npp) * g.row as u64).unwrap();
    drop(f);
    let o = file.cmd("pc2", &["--no-layer-files"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{log}");
    let res: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let first =
        &res["sectors"].as_array().unwrap().iter().find(|e| e["sector_id"] == cfg.sectors[0].sector_id).unwrap();
    assert_eq!(first["failure_class"], "io", "{res}");
    assert!(first["failed"].as_str().unwrap().contains(&format!("not a field element at node {v}")), "{res}");
    let second =
        &res["sectors"].as_array().unwrap().iter().find(|e| e["sector_id"] == cfg.sectors[1].sector_id).unwrap();
    assert!(second["comm_r"].is_string(), "{res}");
}

/// A layer export that fails after every tree is hashed (here its scratch directory is in the
/// way; in production ENOSPC) keeps the checkpoint that says so: the run after it does not
/// hash the trees again, and ends with the outputs of an uninterrupted run.
#[test]
fn a_failed_layer_export_resumes_after_the_trees() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (_, json) = common::config(8 << 20, 6, 1, common::random_seed("failed_export"), work.path(), 1);
    let cfg = ConfigFile::write(work.path().join("c.json"), &json);
    assert!(cfg.seal("pc1").status().unwrap().success());
    assert!(cfg.cmd("pc2", &[]).status().unwrap().success());
    let out = work.path().join("out");
    let whole = out_sectors(&json, &out, work.path());
    std::fs::write(out.join(".layer-export"), b"in the way").unwrap();
    let o = cfg.cmd("pc2", &[]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{log}");
    assert!(out.join("pc2-checkpoint.json").exists(), "the checkpoint went with the failed export");
    std::fs::remove_file(out.join(".layer-export")).unwrap();
    let o = cfg.cmd("pc2", &[]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && log.contains("PC2 resumes with every base tree finished"), "{log}");
    assert!(!out.join("pc2-checkpoint.json").exists());
    assert_same_outputs(&whole, &out_sectors(&json, &out, work.path()));
}
