//! fio, the storage peer: sequential reads or writes (io_uring, `O_DIRECT`) of the same files
//! the sealer's bench uses, one job per file, reported together. Its CPU is the child process'
//! whole (every thread, io_uring's workers included), measured as the sealer's own is.

use std::path::PathBuf;
use std::process::Command;

/// One file's region.
#[derive(Clone, Debug)]
pub struct Region {
    /// The file.
    pub path: PathBuf,
    /// The region's first byte.
    pub offset: u64,
    /// Bytes in the region.
    pub size: u64,
}

/// A sequential run over `regions` at once (one job each).
#[derive(Clone, Debug)]
pub struct Run {
    /// Writes (ending with an fsync of each file) instead of reads.
    pub write: bool,
    /// Request size, bytes.
    pub block_bytes: usize,
    /// Requests in flight per job.
    pub depth: u32,
    /// The regions.
    pub regions: Vec<Region>,
}

/// What fio measured.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Measured {
    /// Bytes moved, all jobs.
    pub bytes: u64,
    /// Bytes per second, all jobs (fio's aggregate bandwidth).
    pub bytes_per_s: f64,
    /// CPU seconds of the fio process, user + system.
    pub cpu_seconds: f64,
}

/// fio's version, or why it cannot run here.
pub fn version() -> Result<String, String> {
    match Command::new("fio").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(format!("fio --version failed: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("fio is not installed ({e}); hack/host-deps.sh installs it")),
    }
}

/// Run fio once. Requests larger than the smallest region are cut to it (fio refuses them).
pub fn run(r: &Run) -> Result<Measured, String> {
    let smallest = r.regions.iter().map(|g| g.size).min().unwrap_or(0) as usize;
    let block_bytes = r.block_bytes.min(smallest / 4096 * 4096).max(4096);
    let mut cmd = Command::new("fio");
    cmd.args([
        "--output-format=json",
        "--group_reporting",
        "--ioengine=io_uring",
        "--direct=1",
        &format!("--rw={}", if r.write { "write" } else { "read" }),
        &format!("--bs={block_bytes}"),
        &format!("--iodepth={}", r.depth),
    ]);
    if r.write {
        // A new file, allocated as it is written (as PC2's outputs are), synced at the end.
        cmd.args(["--end_fsync=1", "--fallocate=none"]);
    }
    for (i, g) in r.regions.iter().enumerate() {
        cmd.arg(format!("--name=j{i}"));
        cmd.arg(format!("--filename={}", g.path.display()));
        cmd.arg(format!("--offset={}", g.offset));
        cmd.arg(format!("--size={}", g.size));
    }
    let c0 = crate::children_cpu_now();
    let out = cmd.output().map_err(|e| format!("running fio: {e}"))?;
    let cpu_seconds = crate::children_cpu_now() - c0;
    if !out.status.success() {
        return Err(format!("fio failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before its JSON document.
    let doc = text.find('{').map(|i| &text[i..]).ok_or("fio printed no JSON")?;
    let v: serde_json::Value = serde_json::from_str(doc).map_err(|e| format!("fio's JSON: {e}"))?;
    let side = &v["jobs"][0][if r.write { "write" } else { "read" }];
    let bytes = side["io_bytes"].as_u64().ok_or("fio's JSON has no io_bytes")?;
    let bytes_per_s = side["bw_bytes"].as_f64().ok_or("fio's JSON has no bw_bytes")?;
    Ok(Measured { bytes, bytes_per_s, cpu_seconds })
}
