//! Tests that drive the `sealer` binary: restart after a kill, config errors and exit codes,
//! verify-pc1 catching corruption, calc output.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sealer"));
    c.env("SEALER_TEST_SLOW_CHUNK_US", "0");
    c
}

#[test]
fn killed_run_resumes_at_first_incomplete_layer_and_matches_oracle() {
    common::init();
    let work = tempfile::tempdir().unwrap();
    let (cfg, json) = common::config(8 << 20, 6, 4, 501, work.path(), 2);
    let cfg_path = work.path().join("batch.json");
    std::fs::write(&cfg_path, json.to_string()).unwrap();
    let state = work.path().join("out/pc1-state.json");

    // First run, slowed down so the kill lands in layer 2.
    let mut child = bin()
        .args(["pc1", "--config", cfg_path.to_str().unwrap(), "--quiet", "--allow-portable-hash"])
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
    let p: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(work.path().join("out/progress.json")).unwrap()).unwrap();
    assert_eq!(p["layer"], 2, "killed during layer 2: {p}");
    assert!(p["layer_percent"].as_f64().unwrap() < 100.0);

    // Second run resumes at layer 2.
    let out = bin().args(["pc1", "--config", cfg_path.to_str().unwrap(), "--quiet", "--allow-portable-hash"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("resuming batch at layer 2"), "{stderr}");
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["first_layer_this_run"], 2);

    // Export, verify, compare with the oracle.
    let export = work.path().join("export");
    let st = bin().args(["layer-export", "--config", cfg_path.to_str().unwrap(), "--out", export.to_str().unwrap()]).status().unwrap();
    assert!(st.success());
    let (rids, cds) = sealer_pc1::sector_ids(&cfg);
    for (i, s) in rep["sectors"].as_array().unwrap().iter().enumerate() {
        assert_eq!(s["replica_id"], hex::encode(rids[i]));
    }
    common::compare_with_oracle(&cfg, &rids, &cds, &export, work.path());

    let v = bin().args(["verify-pc1", "--config", cfg_path.to_str().unwrap(), "--nodes", "200", "--seed", "7"]).output().unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));

    // Corrupt layer 2 on device 0 and verify must notice (exit code 5).
    let g = sealer_pc1::geometry(&cfg, sealer_pc1::Tuning::default());
    let stripe = sealer_pc1::stripe(&cfg, &g);
    let (_, off) = stripe.locate(2, 0);
    let dev0 = &cfg.layers.paths[0];
    let mut data = std::fs::read(dev0).unwrap();
    let len = (stripe.blocks_per_layer * 4096) as usize;
    for b in &mut data[off as usize..off as usize + len] {
        *b ^= 0x5a;
    }
    std::fs::write(dev0, data).unwrap();
    let v = bin().args(["verify-pc1", "--config", cfg_path.to_str().unwrap(), "--nodes", "200", "--seed", "7"]).output().unwrap();
    assert_eq!(v.status.code(), Some(5), "{}", String::from_utf8_lossy(&v.stdout));

    // A third run has nothing left to do.
    let out = bin().args(["pc1", "--config", cfg_path.to_str().unwrap(), "--quiet", "--allow-portable-hash"]).output().unwrap();
    assert!(out.status.success());
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["labels"], 0);
}

#[test]
fn invalid_config_fails_before_work_naming_the_field() {
    let work = tempfile::tempdir().unwrap();
    let (_, mut json) = common::config(2048, 5, 2, 9, work.path(), 1);
    json["sectors"][1]["ticket"] = "1234".into();
    let p = work.path().join("bad.json");
    std::fs::write(&p, json.to_string()).unwrap();
    let out = bin().args(["pc1", "--config", p.to_str().unwrap(), "--quiet"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sectors[1].ticket"), "{err}");
    assert!(!work.path().join("dev0.img").exists(), "no storage may be touched");

    // layout CPU that does not exist here
    let (_, mut json) = common::config(2048, 5, 2, 9, work.path(), 1);
    json["layout"] = serde_json::json!({"batch_size": 2, "supported": true,
        "coordinators": [{"cpu": 4000, "hashers": [{"cpu": 4001, "sectors": 2}]}],
        "roles": {"writer": 0, "reader": 0, "orchestrator": 0}});
    std::fs::write(&p, json.to_string()).unwrap();
    let out = bin().args(["pc1", "--config", p.to_str().unwrap(), "--quiet", "--allow-portable-hash"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("layout.coordinators[0].cpu"));
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
