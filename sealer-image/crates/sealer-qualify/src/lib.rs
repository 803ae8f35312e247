//! `sealer qualify`: what a node can do for sealing, measured without destroying data, as the
//! document the operator reads (`contracts/sealer-qualification.json`, read by the operator's
//! `controllers/qualify.go`).
//!
//! * Each layer device (block device or regular file, [`device`]): sequential write bandwidth
//!   only inside the [`WriteRange`] given (a free slot), then 4 KiB random-read IOPS and
//!   sequential read bandwidth inside that range (anywhere without one); a layer file is grown
//!   to the range's end, never truncated.
//! * The label hashing rate of one thread ([`sealer_hash::bound_rate`]).
//! * 1 GiB hugepages: free in the node's pool, and a probe that maps and faults some
//!   ([`hugepages`]).
//! * Memory copy bandwidth ([`memory`]).
//!
//! The GPU is listed (as `sealer capabilities` lists it, given by the caller: this crate opens
//! no OpenCL) but its speed is not measured.

#![warn(missing_docs)]

use serde::Serialize;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub mod device;
pub mod hugepages;
pub mod memory;

/// The document's version: bumped when a key changes meaning.
pub const SCHEMA: u32 = 1;

/// The tool that measured, `sealer <version>` (the crates share the workspace's version).
pub const TOOL: &str = concat!("sealer ", env!("CARGO_PKG_VERSION"));

/// Streams per kernel call the hashing rate is measured with (sectors hashed in pairs).
pub const HASH_STREAMS: usize = 2;

/// Where on a device the write measurement may write: bytes `[offset, offset + length)`, both
/// multiples of 4 KiB (a free slot the operator hands over). Nothing outside it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRange {
    /// First byte (a multiple of 4096).
    pub offset: u64,
    /// Bytes (a multiple of 4096, at least 4096).
    pub length: u64,
}

impl WriteRange {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.length
    }
}

impl std::str::FromStr for WriteRange {
    type Err = String;

    /// `OFFSET:LENGTH` in bytes, e.g. `1048576:1048576`; the message says what is wrong.
    fn from_str(s: &str) -> Result<Self, String> {
        let form = "expected OFFSET:LENGTH in bytes, both multiples of 4096 and LENGTH > 0 (e.g. 1048576:1048576)";
        let (o, l) = s.split_once(':').ok_or_else(|| format!("{s:?}: {form}"))?;
        let num = |x: &str, what: &str| {
            x.trim().parse::<u64>().map_err(|_| format!("{s:?}: {what} {x:?} is not a number of bytes; {form}"))
        };
        let (offset, length) = (num(o, "OFFSET")?, num(l, "LENGTH")?);
        if offset % 4096 != 0 || length % 4096 != 0 || length == 0 {
            return Err(format!("{s:?}: {form}"));
        }
        if offset.checked_add(length).is_none() {
            return Err(format!("{s:?}: OFFSET + LENGTH overflows 64 bits"));
        }
        Ok(WriteRange { offset, length })
    }
}

/// What to measure and for how long.
#[derive(Clone, Debug)]
pub struct Options {
    /// Layer devices (block devices or regular files), measured one after the other.
    pub devices: Vec<PathBuf>,
    /// Where the write measurement may write, on every device (None: no write measurement).
    pub write_range: Option<WriteRange>,
    /// Why there is no write measurement without a range (the device's `write_skipped`).
    pub no_write_reason: String,
    /// Seconds per measurement (each device's random reads, its sequential reads, its writes,
    /// the hashing, the memory copy).
    pub seconds: f64,
    /// Requests in flight for the random reads.
    pub depth: u32,
    /// 1 GiB hugepages to map in the probe (at most the free ones).
    pub hugepages_probe: usize,
    /// Threads of the memory copy.
    pub threads: usize,
    /// The GPU device as `sealer capabilities` lists it (`gpu_device`), or None.
    pub gpu: Option<serde_json::Value>,
}

impl Default for Options {
    /// No devices, 2 s per measurement, depth 64, one hugepage probed, [`default_threads`].
    fn default() -> Self {
        Options {
            devices: Vec::new(),
            write_range: None,
            no_write_reason: "no write range given".into(),
            seconds: 2.0,
            depth: 64,
            hugepages_probe: 1,
            threads: default_threads(),
            gpu: None,
        }
    }
}

/// Memory-copy threads by default: the CPUs this process may use, at most 8 (enough to
/// saturate a socket's channels without measuring the scheduler).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8)
}

/// The qualification document (`contracts/sealer-qualification.json`).
#[derive(Clone, Debug, Serialize)]
pub struct Qualification {
    /// [`SCHEMA`].
    pub schema: u32,
    /// [`TOOL`].
    pub tool: String,
    /// When the run started, unix seconds.
    pub started_unix: u64,
    /// Wall seconds the whole run took.
    pub duration_seconds: f64,
    /// One entry per device, in the order given.
    pub devices: Vec<device::DeviceResult>,
    /// The label hashing rate.
    pub hashing: Hashing,
    /// The node's 1 GiB hugepages.
    pub hugepages_1gi: hugepages::Hugepages,
    /// Memory copy bandwidth, bytes copied per second summed over the threads (each byte is
    /// read once and written once: twice that crosses the memory bus).
    pub memory_copy_bytes_per_s: f64,
    /// The GPU PC2 would use (`sealer capabilities`' `gpu_device`), or null; not measured.
    pub gpu: Option<serde_json::Value>,
}

/// The label hashing rate of one thread.
#[derive(Clone, Debug, Serialize)]
pub struct Hashing {
    /// `sha-ni`, or `portable` where the CPU lacks SHA-NI (then PC1 refuses to run unless told
    /// to accept the portable kernel).
    pub kernel: String,
    /// Threads measured (1).
    pub threads: usize,
    /// Sector-labels per second of one thread hashing [`HASH_STREAMS`] sectors per call, parents
    /// in memory: the bound PC1's hashers reach, before any I/O.
    pub labels_per_s_per_thread: f64,
}

/// The hashing rate of one thread on this CPU, for about `seconds`.
pub fn hashing(seconds: f64) -> Hashing {
    // SHA-NI when the CPU has it, else the portable kernel, which the name says.
    let kernel = sealer_hash::Kernel::select(true).expect("the portable kernel is allowed");
    let name = match kernel {
        sealer_hash::Kernel::ShaNi => "sha-ni",
        sealer_hash::Kernel::Portable => "portable",
    };
    if name == "portable" {
        log::warn!("this CPU lacks SHA-NI: measuring the portable kernel");
    }
    Hashing {
        kernel: name.into(),
        threads: 1,
        labels_per_s_per_thread: sealer_hash::bound_rate(kernel, HASH_STREAMS, seconds),
    }
}

/// Measure everything `opts` asks for, one measurement at a time. A device that fails has its
/// error in its entry; the others are still measured.
pub fn qualify(opts: &Options) -> Qualification {
    let started_unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let t0 = Instant::now();
    let devices = opts.devices.iter().map(|p| device::measure(p, opts)).collect();
    log::info!("hashing: one thread, {HASH_STREAMS} streams…");
    let hashing = hashing(opts.seconds);
    log::info!("1 GiB hugepages: probing {}…", opts.hugepages_probe);
    let hugepages_1gi = hugepages::probe(opts.hugepages_probe);
    log::info!("memory copy: {} threads…", opts.threads);
    let memory_copy_bytes_per_s = memory::copy_bandwidth(opts.threads, opts.seconds);
    Qualification {
        schema: SCHEMA,
        tool: TOOL.into(),
        started_unix,
        duration_seconds: t0.elapsed().as_secs_f64(),
        devices,
        hashing,
        hugepages_1gi,
        memory_copy_bytes_per_s,
        gpu: opts.gpu.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_ranges_parse_or_say_why_not() {
        assert_eq!("1048576:1048576".parse(), Ok(WriteRange { offset: 1 << 20, length: 1 << 20 }));
        assert_eq!("0:4096".parse::<WriteRange>().map(|r| r.end()), Ok(4096));
        for bad in ["", "4096", "x:4096", "4096:y", "4096:0", "100:4096", "4096:100", "-4096:4096"] {
            let e = bad.parse::<WriteRange>().unwrap_err();
            assert!(e.contains("OFFSET:LENGTH"), "{bad}: {e}");
        }
        let e = format!("{}:{}", u64::MAX - 4095, 8192).parse::<WriteRange>().unwrap_err();
        assert!(e.contains("overflows"), "{e}");
    }

    /// Keys of `got` and `want`, recursively: objects by their sorted keys, arrays item by
    /// item; a mismatch names where.
    fn same_keys(got: &serde_json::Value, want: &serde_json::Value, at: &str) {
        use serde_json::Value::{Array, Object};
        match (got, want) {
            (Object(g), Object(w)) => {
                let mut gk: Vec<_> = g.keys().collect();
                let mut wk: Vec<_> = w.keys().collect();
                gk.sort();
                wk.sort();
                assert_eq!(gk, wk, "keys of {at}");
                for k in gk {
                    same_keys(&g[k], &w[k], &format!("{at}.{k}"));
                }
            }
            (Array(g), Array(w)) => {
                assert_eq!(g.len(), w.len(), "items of {at}");
                for (i, (g, w)) in g.iter().zip(w).enumerate() {
                    same_keys(g, w, &format!("{at}[{i}]"));
                }
            }
            (Object(_) | Array(_), _) | (_, Object(_) | Array(_)) => panic!("{at}: {got} against {want}"),
            _ => {}
        }
    }

    /// A document with a device measured with a write and one whose write was skipped has
    /// exactly the keys of the operator's contract example (contracts/sealer-qualification.json,
    /// which controllers/qualify.go reads), nested objects and array items included.
    #[test]
    fn document_is_the_operators_contract() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/sealer-qualification.json");
        let contract: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let dev = |path: &str, write: Option<f64>, skipped: Option<&str>| device::DeviceResult {
            path: path.into(),
            bytes: Some(1 << 40),
            direct: Some(true),
            queue_depth: 64,
            random_read_iops: Some(5e5),
            seq_read_bytes_per_s: Some(3e9),
            seq_write_bytes_per_s: write,
            write_skipped: skipped.map(Into::into),
            error: None,
        };
        let doc = Qualification {
            schema: SCHEMA,
            tool: TOOL.into(),
            started_unix: 1_795_000_000,
            duration_seconds: 9.5,
            devices: vec![
                dev("/dev/nvme1n1", Some(2e9), None),
                dev("/dev/nvme2n1", None, Some("no free slot to write in")),
            ],
            hashing: Hashing { kernel: "sha-ni".into(), threads: 1, labels_per_s_per_thread: 2.4e6 },
            hugepages_1gi: hugepages::Hugepages { free: 4, probed: 1, mapped: 1, error: None },
            memory_copy_bytes_per_s: 1.2e10,
            // The keys of `sealer capabilities`' gpu_device; the sealer crate's test holds
            // sealer-gpu's DeviceInfo to the same example.
            gpu: Some(contract["examples"][0]["gpu"].clone()),
        };
        let got = serde_json::to_value(&doc).unwrap();
        let want = &contract["examples"][0];
        same_keys(&got, want, "document");
        assert_eq!(want["schema"], SCHEMA);
        assert!(
            want["devices"][1]["seq_write_bytes_per_s"].is_null() && want["devices"][1]["write_skipped"].is_string()
        );
    }
}
