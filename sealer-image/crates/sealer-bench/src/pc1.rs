//! `sealer bench pc1`: the SHA bound, rust-fil-proofs PC1, and the sealer on N sectors, all
//! on this machine in one invocation, reported as sector-labels/s per core.

use crate::cpu_now;
use crate::slot::random_config;
use sealer_config::{ApiVersion, Layout};
use sealer_hash::Kernel;
use sealer_oracle as oracle;
use sealer_pc1::Pc1Options;
use sealer_slot::Tuning;
use std::path::PathBuf;
use std::time::Instant;

/// Bench options.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Sector size in bytes (8 MiB quick, 512 MiB default).
    pub sector_size: u64,
    /// Batch sizes for the sealer.
    pub batches: Vec<usize>,
    /// Directory for layer files (use tmpfs to measure the engine, a disk to measure I/O).
    pub dir: PathBuf,
    /// Skip the rust-fil-proofs baseline.
    pub skip_baseline: bool,
    /// Seconds per SHA-bound measurement.
    pub sha_seconds: f64,
    /// Node-cache budgets of the sealer runs, bytes: every N runs once per value.
    pub cache_bytes: Vec<u64>,
    /// Label only the first this many layers of each batch (None: all).
    pub max_layers: Option<usize>,
    /// When > 0, run every N twice: buffers on ordinary pages, then on up to this many 1 GiB
    /// hugepages (the node's pool must hold them free).
    pub hugepages: usize,
    /// Percentages of the previous layer held resident; every N runs once per value (e.g.
    /// 0, 50, 100). Only matters when the node cache cannot keep the whole previous layer.
    pub resident_percents: Vec<u64>,
}

/// One row of the result table.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured.
    pub name: String,
    /// Sector-labels per second (all cores used).
    pub labels_per_s: f64,
    /// Cores the measurement used.
    pub cores: f64,
    /// Wall seconds.
    pub seconds: f64,
    /// CPU seconds (user + system, all threads of this process incl. io_uring workers).
    pub cpu_seconds: f64,
    /// Sector-labels computed.
    pub labels: f64,
    /// 4 KiB random page reads per sector-label (sealer rows only).
    pub reads_per_label: Option<f64>,
    /// Per-layer figures (sealer rows only).
    pub layers: Vec<sealer_pc1::LayerStats>,
    /// Random reads/s a 32 GiB batch of the same N and resident share would need at this
    /// row's rate (`sealer plan`'s model; sealer rows only).
    pub iops_32gib: Option<f64>,
}

impl Row {
    /// A one-core rate measured for `seconds` (the SHA bounds).
    fn measured(name: &str, labels_per_s: f64, seconds: f64, cpu_seconds: f64) -> Row {
        Row {
            name: name.into(),
            labels_per_s,
            cores: 1.0,
            seconds,
            cpu_seconds,
            labels: labels_per_s * seconds,
            reads_per_label: None,
            layers: Vec::new(),
            iops_32gib: None,
        }
    }
    /// Labels/s per core, wall-clock based (labels/s divided by the cores the run may use).
    pub fn per_core(&self) -> f64 {
        self.labels_per_s / self.cores
    }
    /// Labels per CPU-second actually consumed (robust on a shared machine).
    pub fn per_cpu_second(&self) -> f64 {
        if self.cpu_seconds > 0.0 {
            self.labels / self.cpu_seconds
        } else {
            0.0
        }
    }
}

fn cpu_timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let c0 = cpu_now();
    let r = f();
    (r, cpu_now() - c0)
}

/// Sector-labels/s of one thread hashing `streams` sectors per kernel call (1, 2 or 3) with
/// the engine's own call (`label_rows`) on parents in memory: the bound the engine can reach.
/// `None`: SHA-NI, or 0 when this CPU lacks it.
fn sha_bound(kernel: Option<Kernel>, streams: usize, secs: f64) -> f64 {
    match kernel.map(Ok).unwrap_or_else(|| Kernel::select(false)) {
        Ok(k) => sealer_hash::bound_rate(k, streams, secs),
        Err(_) => 0.0,
    }
}

fn cores_of(l: &Layout) -> f64 {
    let mut cpus = std::collections::BTreeSet::new();
    for c in &l.coordinators {
        cpus.insert(c.cpu);
        for h in &c.hashers {
            cpus.insert(h.cpu);
        }
    }
    cpus.insert(l.roles.reader);
    cpus.insert(l.roles.writer);
    cpus.insert(l.roles.orchestrator);
    cpus.len() as f64
}

/// Run the benchmark and return the table rows.
pub fn run(o: &BenchOptions) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let size_idx =
        sealer_config::SECTOR_SIZES.iter().position(|s| s.0 == o.sector_size).ok_or("unsupported sector size")?;
    let proof_id = 5 + size_idx as u64; // V1_1
    std::fs::create_dir_all(&o.dir).map_err(|e| format!("{e:#}"))?;
    oracle::set_cache_env(&o.dir.join("fil-cache"));
    std::env::set_var("FIL_PROOFS_USE_MULTICORE_SDR", "1");

    log::info!("SHA-NI bound (1, 2 and 3 streams interleaved)…");
    for (streams, name) in [
        (1, "SHA-NI bound, 1 stream (20 blocks/label)"),
        (2, "SHA-NI bound, 2 streams interleaved"),
        (3, "SHA-NI bound, 3 streams interleaved (the engine's kernel)"),
    ] {
        let (rate, cpu) = cpu_timed(|| sha_bound(None, streams, o.sha_seconds));
        rows.push(Row::measured(name, rate, o.sha_seconds, cpu));
    }
    let (rate, cpu) = cpu_timed(|| sha_bound(Some(Kernel::Portable), 1, o.sha_seconds));
    rows.push(Row::measured("sha2 crate compress256, 1 stream (reference)", rate, o.sha_seconds, cpu));

    // Build the parent cache first so neither side pays for it in the timings.
    let probe = random_config(o.sector_size, proof_id, ApiVersion::V1_1_0, 1, 1, &o.dir, &o.dir.join("probe"));
    sealer_slot::open_parents(&probe).map_err(|e| format!("{e:#}"))?;

    if !o.skip_baseline {
        let multicore = cfg!(feature = "oracle-multicore");
        log::info!("rust-fil-proofs PC1, one sector (multicore-sdr: {multicore})…");
        let work = o.dir.join("rfp");
        std::fs::create_dir_all(&work).map_err(|e| format!("{e:#}"))?;
        let t0 = Instant::now();
        let r0 = cpu_now();
        oracle::pc1_sector(&probe, &probe.sectors[0], &work, false).map_err(|e| format!("{e:#}"))?;
        let secs = t0.elapsed().as_secs_f64();
        let cpu = cpu_now() - r0;
        let labels = (o.sector_size / 32) as f64 * oracle::filecoin_proofs_layers(o.sector_size) as f64;
        let cores = if multicore { sealer_config::allowed_cpus().len() as f64 } else { 1.0 };
        rows.push(Row {
            name: format!(
                "rust-fil-proofs PC1, 1 sector ({})",
                if multicore { "multicore-sdr" } else { "single-core path" }
            ),
            labels_per_s: labels / secs,
            cores,
            seconds: secs,
            cpu_seconds: cpu,
            labels,
            reads_per_label: None,
            layers: Vec::new(),
            iops_32gib: None,
        });
        let _ = std::fs::remove_dir_all(&work);
    }

    let backings: &[usize] = if o.hugepages > 0 { &[0, o.hugepages] } else { &[0] };
    let residents: &[u64] = if o.resident_percents.is_empty() { &[0] } else { &o.resident_percents };
    let caches: &[u64] = if o.cache_bytes.is_empty() { &[1 << 30] } else { &o.cache_bytes };
    let runs = o.batches.iter().flat_map(|n| {
        caches.iter().flat_map(move |c| backings.iter().flat_map(move |h| residents.iter().map(move |r| (n, c, h, r))))
    });
    for (&n, &cache_bytes, &huge, &resident_pct) in runs {
        log::info!("sealer PC1, N = {n}…");
        let out = o.dir.join(format!("sealer-n{n}"));
        let _ = std::fs::remove_dir_all(&out);
        let cfg = random_config(
            o.sector_size,
            proof_id,
            ApiVersion::V1_1_0,
            n,
            42 + n as u64,
            &o.dir.join(format!("sealer-n{n}-layers")),
            &out,
        );
        let mut cfg = cfg;
        cfg.hugepages_1gi = huge;
        // The resident share of one layer of the batch (N × sector size bytes).
        let resident_bytes = resident_pct * n as u64 * o.sector_size / 100;
        let opts = Pc1Options {
            tuning: Tuning { ring_bytes: cache_bytes, resident_bytes, ..Tuning::default() },
            restart: true,
            max_layers: o.max_layers,
            ..Default::default()
        };
        let r0 = cpu_now();
        let rep = sealer_pc1::run_pc1(&cfg, &opts).map_err(|e| format!("{e:#}"))?;
        let cpu = cpu_now() - r0;
        let cores = cores_of(&cfg.effective_layout());
        let pages = match &rep.buffers {
            Some(b) if o.hugepages > 0 && b.hugepage_bytes > 0 => {
                format!(", buffers on {} x 1 GiB hugepages", b.hugepages_mapped)
            }
            _ if o.hugepages > 0 => ", buffers on 4 KiB pages".to_string(),
            _ => String::new(),
        };
        let expanders = if rep.geometry.keep_prev_layer {
            "memory".to_string()
        } else if rep.geometry.resident > 0 {
            format!(
                "storage, {:.0} % of the previous layer resident",
                100.0 * rep.geometry.resident as f64 / rep.geometry.nodes as f64
            )
        } else {
            "storage".to_string()
        };
        rows.push(Row {
            name: format!(
                "sealer PC1, N = {n} ({} hasher threads, {:?}, {}, {} MiB node cache, expanders from {expanders}{pages}{})",
                rep.hasher_threads,
                rep.kernel,
                rep.backend,
                cache_bytes >> 20,
                if rep.layer_stats.len() < rep.layers { format!(", layers 1-{}", rep.layer_stats.len()) } else { String::new() },
            ),
            labels_per_s: rep.labels as f64 / rep.seconds,
            cores,
            seconds: rep.seconds,
            cpu_seconds: cpu,
            labels: rep.labels as f64,
            reads_per_label: Some(rep.pages_read as f64 / rep.labels as f64),
            layers: rep.layer_stats.clone(),
            iops_32gib: Some(
                rep.labels as f64 / rep.seconds / n as f64
                    * sealer_slot::geometry::expander_reads_per_node(resident_pct as f64 / 100.0),
            ),
        });
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_dir_all(o.dir.join(format!("sealer-n{n}-layers")));
    }
    Ok(rows)
}

/// Render the table with ratios against the rust-fil-proofs row (labels per CPU-second) and
/// the 2-stream SHA bound (labels/s per core, wall).
pub fn render(rows: &[Row], sector_size: u64) -> String {
    let base = rows.iter().find(|r| r.name.starts_with("rust-fil-proofs")).map(|r| r.per_cpu_second());
    let bound = rows.iter().find(|r| r.name.starts_with("SHA-NI bound, 2 streams")).map(|r| r.per_core());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut s = format!(
        "sector size {sector_size} B, {} CPUs available, load average at end: {}\n\
         M labels/s/core (wall) = sector-labels/s ÷ cores the run may use; M labels/CPU-s = sector-labels ÷ CPU seconds this process consumed.\n\
         vs rust-fil-proofs: labels per CPU-second; vs 2-stream SHA bound: M labels/s/core (wall).\n\
         4 KiB reads per sector-label: random parent page reads ÷ sector-labels (the resident part's sequential fill not counted).\n\
         32 GiB batch needs: expander reads/s of a 32 GiB batch of the same N and resident share at this row's rate (8 per node step, less the resident share).\n\
         | measurement | wall s | cores | M labels/s | M labels/s/core (wall) | M labels/CPU-s | 4 KiB reads / sector-label | 32 GiB batch needs, reads/s | vs rust-fil-proofs | vs 2-stream SHA bound |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        sealer_config::allowed_cpus().len(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    for r in rows {
        let vs = |x: f64, b: Option<f64>| {
            b.filter(|b| *b > 0.0).map(|b| format!("{:.2}×", x / b)).unwrap_or_else(|| "–".into())
        };
        s += &format!(
            "| {} | {:.2} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} |\n",
            r.name,
            r.seconds,
            r.cores,
            r.labels_per_s / 1e6,
            r.per_core() / 1e6,
            r.per_cpu_second() / 1e6,
            r.reads_per_label.map_or("–".into(), |x| format!("{x:.3}")),
            r.iops_32gib.map_or("–".into(), |x| format!("{:.2} M", x / 1e6)),
            vs(r.per_cpu_second(), base),
            vs(r.per_core(), bound)
        );
    }
    for r in rows.iter().filter(|r| !r.layers.is_empty()) {
        s += &format!(
            "\n{}, per layer. Reads: random 4 KiB parent reads per sector-label, and what \
             reading each page that holds a parent not in memory once per layer would make. Reader CPU: the reader thread's CPU \
             time per read (resolving parents, submitting, reaping). Hasher wait: share of the layer the \
             hashers were not hashing.\n\
             | layer | s | M labels/s/core (wall) | reads / sector-label | each page once | IOPS | reader CPU µs / read | hasher wait |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|\n",
            r.name
        );
        for l in &r.layers {
            s += &format!(
                "| {} | {:.2} | {:.3} | {:.4} | {:.4} | {:.0} | {} | {:.0} % |\n",
                l.layer,
                l.seconds,
                l.labels as f64 / l.seconds / r.cores / 1e6,
                l.reads_per_label(),
                l.min_reads_per_label(),
                l.iops(),
                l.reader_cpu_us_per_read().map_or("–".into(), |x| format!("{x:.2}")),
                100.0 * l.hasher_wait()
            );
        }
    }
    s
}
