//! The crash-point matrix: every durable step of a seal (PC1's layers and state, PC2's files,
//! checkpoints and renames, tree-d, `t_aux`/`p_aux`, the layer export, `results.json`) is a
//! named crash point (`sealer_storage::durable`). For each, a `sealer batch` of a CC and a data
//! sector is stopped there as a kill would stop it, then run again: it must end with every
//! output byte-identical to an uninterrupted run's, or refuse with a documented exit code. It
//! never exits 0 with other bytes. With lost writes, what was written after each file's last
//! sync is thrown away at the crash (as a power loss does) before the run again.
//!
//! `make test` runs, with and without lost writes, the first, a middle and the last pass of
//! every point at 2 KiB on the CPU engine and the first on the GPU engine (pocl);
//! `make test-crash` every pass at 2 KiB and the first, a middle and the last at 8 MiB, both
//! engines.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

/// Exit codes a run after a crash may refuse with (contracts/exit-codes.json): bad input,
/// storage, outputs that fail verification.
const REFUSALS: [i32; 3] = [2, 3, 5];

struct Scenario {
    work: tempfile::TempDir,
    config: PathBuf,
    out: PathBuf,
    devices: Vec<PathBuf>,
}

impl Scenario {
    /// A CC and a data sector of `size`, sealed by `engine`.
    fn new(size: u64, engine: &str) -> Self {
        common::init();
        let work = tempfile::tempdir().unwrap();
        let (cfg, mut json) = common::config(size, 6, 2, common::random_seed("crash matrix"), work.path(), 1);
        let piece = work.path().join("piece");
        let bytes = (size as usize / 128 * 127).min(300_000);
        std::fs::write(&piece, (0..bytes as u32).map(|j| (j * 13 + 5) as u8).collect::<Vec<_>>()).unwrap();
        let staged = work.path().join("staged");
        let pieces = sealer_data::stage(size, &[piece.as_path()], &staged).unwrap();
        json["sectors"][1]["data"] = serde_json::json!({"path": staged.to_str().unwrap(),
            "pieces": pieces.iter().map(|p| serde_json::json!({"comm_p": hex::encode(p.comm_p), "size": p.size})).collect::<Vec<_>>()});
        json["pc2_engine"] = engine.into();
        let config = work.path().join("c.json");
        std::fs::write(&config, json.to_string()).unwrap();
        Scenario { out: cfg.output_dir.clone(), devices: cfg.layers.paths.clone(), config, work }
    }

    fn batch(&self, env: &[(&str, &str)]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_sealer"))
            .args(["batch", "--quiet", "--allow-portable-hash", "--config"])
            .arg(&self.config)
            .env("SEALER_TEST_SLOW_CHUNK_US", "0")
            // Mid-tree checkpoints where a base tree has several ranges (8 MiB).
            .env("SEALER_TEST_PC2_CHECKPOINT_EVERY_RANGE", "1")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    /// Nothing of a run left: the outputs and the layer slot.
    fn wipe(&self) {
        let _ = std::fs::remove_dir_all(&self.out);
        for d in &self.devices {
            let _ = std::fs::remove_file(d);
        }
    }

    /// Every output file (path under the output directory, bytes), `progress.json` aside.
    fn outputs(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        let mut stack = vec![self.out.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if !p.ends_with("progress.json") && !p.ends_with("results.json") {
                    files.insert(p.strip_prefix(&self.out).unwrap().to_path_buf(), std::fs::read(&p).unwrap());
                }
            }
        }
        files
    }

    fn results(&self) -> serde_json::Value {
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.out.join("results.json")).unwrap()).unwrap();
        r["sectors"].clone()
    }
}

/// The points an uninterrupted run passes, and how often each.
fn points(log: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for name in log.lines().filter_map(|l| l.strip_prefix("crash point: ")) {
        *m.entry(name.to_string()).or_insert(0) += 1;
    }
    m
}

#[derive(Default)]
struct Tally {
    cases: usize,
    identical: usize,
    refused: Vec<String>,
}

/// Run the matrix on `sc`: each point at the passes `pick` chooses, with and without lost
/// writes as `modes` says.
fn matrix(sc: &Scenario, pick: fn(u64) -> Vec<u64>, modes: &[bool]) -> (BTreeMap<String, u64>, Tally) {
    sc.wipe();
    let whole = sc.batch(&[("SEALER_TEST_CRASH_LIST", "1")]);
    let log = String::from_utf8_lossy(&whole.stderr);
    assert!(whole.status.success(), "{log}");
    let all = points(&log);
    for want in
        ["pc1.layer-flushed", "pc2.create", "pc2.write", "pc2.sync", "pc2.checkpoint", "durable.rename", "sealer.exit"]
    {
        assert!(all.contains_key(want), "no crash point {want} in {all:?}");
    }
    let (want_files, want_results) = (sc.outputs(), sc.results());
    let mut t = Tally::default();
    for (name, &passes) in &all {
        for n in pick(passes) {
            for &lose in modes {
                sc.wipe();
                let lost = sc.work.path().join("lost");
                let _ = std::fs::remove_dir_all(&lost);
                let at = format!("{name}:{n}");
                let mut env = vec![(sealer_storage::durable::CRASH_ENV, at.as_str())];
                let lost_s = lost.to_str().unwrap().to_string();
                if lose {
                    env.push((sealer_storage::durable::LOSE_ENV, lost_s.as_str()));
                }
                let crashed = sc.batch(&env);
                let case = format!("{at}{}", if lose { " with lost writes" } else { "" });
                assert_eq!(
                    crashed.status.code(),
                    Some(sealer_storage::durable::CRASH_EXIT),
                    "{case}: {}",
                    String::from_utf8_lossy(&crashed.stderr)
                );
                if lose {
                    sealer_storage::durable::restore_synced(&lost).unwrap();
                    if name == "sealer.exit" {
                        // A power loss after exit 0: every output is one the sealer tracks
                        // (written through its durable steps), and was synced before it.
                        let index = std::fs::read_to_string(lost.join("index")).unwrap();
                        let tracked: Vec<&str> =
                            index.lines().filter_map(|l| l.split_once('\t')).map(|x| x.1).collect();
                        for f in want_files.keys() {
                            let p = sc.out.join(f);
                            assert!(
                                tracked.contains(&p.to_str().unwrap()),
                                "{case}: {} is written outside the durable steps",
                                p.display()
                            );
                        }
                        let got = sc.outputs();
                        for (f, bytes) in &want_files {
                            assert!(got.get(f) == Some(bytes), "{case}: {} was not synced before exit 0", f.display());
                        }
                        assert_eq!(sc.results(), want_results, "{case}: results.json not synced before exit 0");
                    }
                }
                let again = sc.batch(&[]);
                let log = String::from_utf8_lossy(&again.stderr);
                t.cases += 1;
                match again.status.code() {
                    Some(0) => {
                        let got = sc.outputs();
                        assert_eq!(got.keys().collect::<Vec<_>>(), want_files.keys().collect::<Vec<_>>(), "{case}");
                        for (f, bytes) in &want_files {
                            assert!(got[f] == *bytes, "{case}: {} differs from an uninterrupted run's", f.display());
                        }
                        assert_eq!(sc.results(), want_results, "{case}");
                        t.identical += 1;
                    }
                    Some(c) if REFUSALS.contains(&c) && log.contains("error") => {
                        t.refused.push(format!("{case}: exit {c}"))
                    }
                    other => panic!("{case}: the run after the crash exited {other:?}: {log}"),
                }
            }
        }
    }
    (all, t)
}

fn first_middle_last(n: u64) -> Vec<u64> {
    let mut v = vec![1, n.div_ceil(2), n];
    v.dedup();
    v
}

fn every(n: u64) -> Vec<u64> {
    (1..=n).collect()
}

fn report(what: &str, all: &BTreeMap<String, u64>, t: &Tally, started: std::time::Instant) {
    eprintln!(
        "BENCH crash matrix {what}: {} points ({} passes in all), {} cases: {} resumed byte-identical, {} refused {:?}, in {:.0} s",
        all.len(),
        all.values().sum::<u64>(),
        t.cases,
        t.identical,
        t.refused.len(),
        t.refused,
        started.elapsed().as_secs_f64()
    );
}

/// `make test`'s share of the matrix, with and without lost writes: 2 KiB, the first, a middle
/// and the last pass of every point on the CPU engine, the first pass on the GPU engine (the
/// rest of its passes are `make test-crash`'s).
#[test]
fn every_crash_point_resumes_byte_identical_or_refuses() {
    let t0 = std::time::Instant::now();
    let sc = Scenario::new(2048, "cpu");
    let (all, t) = matrix(&sc, first_middle_last, &[false, true]);
    report("2 KiB cpu", &all, &t, t0);
    let t0 = std::time::Instant::now();
    let sc = Scenario::new(2048, "gpu");
    let (all, t) = matrix(&sc, |_| vec![1], &[false, true]);
    report("2 KiB gpu (first passes)", &all, &t, t0);
}

/// One part of `make test-crash`: every point, with and without lost writes.
fn full(size: u64, engine: &str, pick: fn(u64) -> Vec<u64>) {
    let t0 = std::time::Instant::now();
    let sc = Scenario::new(size, engine);
    let (all, t) = matrix(&sc, pick, &[false, true]);
    report(&format!("{size} bytes {engine}"), &all, &t, t0);
}

// `make test-crash`: every pass at 2 KiB; at 8 MiB (four ranges a base tree, a checkpoint
// after each) the first, a middle and the last pass; both engines.

#[test]
#[ignore = "the full matrix: make test-crash"]
fn full_crash_matrix_2kib_cpu() {
    full(2048, "cpu", every);
}

#[test]
#[ignore = "the full matrix: make test-crash"]
fn full_crash_matrix_2kib_gpu() {
    full(2048, "gpu", every);
}

#[test]
#[ignore = "the full matrix: make test-crash"]
fn full_crash_matrix_8mib_cpu() {
    full(8 << 20, "cpu", first_middle_last);
}

#[test]
#[ignore = "the full matrix: make test-crash"]
fn full_crash_matrix_8mib_gpu() {
    full(8 << 20, "gpu", first_middle_last);
}

/// PC1 and PC2 stopped and continued every 50 ms (SIGSTOP/SIGCONT, as a debugger, a job
/// control shell or the cgroup freezer do) finish byte-identical to an undisturbed run.
#[test]
fn a_seal_under_a_sigstop_sigcont_storm_is_byte_identical() {
    let sc = Scenario::new(8 << 20, "cpu");
    sc.wipe();
    let whole = sc.batch(&[]);
    assert!(whole.status.success(), "{}", String::from_utf8_lossy(&whole.stderr));
    let (want_files, want_results) = (sc.outputs(), sc.results());
    sc.wipe();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sealer"))
        .args(["batch", "--quiet", "--allow-portable-hash", "--config"])
        .arg(&sc.config)
        .env("SEALER_TEST_SLOW_CHUNK_US", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let pause = std::time::Duration::from_millis(50);
    let mut stops = 0;
    // Signalled only while not reaped: the pid cannot be another process's.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        // SAFETY: plain kill(2) of our own child, which exists until try_wait reaps it.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        stops += 1;
        std::thread::sleep(pause);
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        std::thread::sleep(pause);
    };
    let mut log = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(status.success(), "after {stops} stops: {log}");
    assert!(stops > 10, "only {stops} stops: the storm did not cover the seal");
    let got = sc.outputs();
    assert_eq!(got.keys().collect::<Vec<_>>(), want_files.keys().collect::<Vec<_>>());
    for (f, bytes) in &want_files {
        assert!(got[f] == *bytes, "{} differs after {stops} stops", f.display());
    }
    assert_eq!(sc.results(), want_results);
    eprintln!("BENCH sigstop storm: {stops} stops of 50 ms, outputs byte-identical");
}
