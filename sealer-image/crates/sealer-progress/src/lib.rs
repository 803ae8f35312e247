//! Progress reporting of every phase: a JSON document (file and/or HTTP `/progress`), Prometheus
//! text (`/metrics`) and a terminal progress line. PC1 feeds it [`LiveStats`]; PC2 and C1 report
//! their steps through the same [`ProgressSink`].
//!
//! Progress JSON (schema version 1):
//! ```json
//! {"schema": 1, "phase": "pc1", "state": "running", "layer": 2, "layers": 11,
//!  "layer_percent": 40.0, "percent": 12.7, "rate_labels_per_s": 1234567.0,
//!  "eta_seconds": 3600.0, "sectors": 32, "sector_size": 34359738368,
//!  "elapsed_seconds": 120.5, "error": null, "updated_unix": 1700000000}
//! ```
//! When the threads are pinned, `cpus` says where (see [`sealer_config::CpuFit`]):
//! `{"granted": "0,1", "l3_groups": ["1"], "moved": {"3": 1}}`.
//! During PC2 `phase` is `pc2` and `layer`/`layers` count base trees (1 for sizes up to
//! 512 MiB). While a SyntheticPoRep batch's synthetic proofs are made after PC2, `phase` is
//! `proofs`, `layer`/`layers` count sectors (proven one after another), `layer_percent` is 0
//! (filecoin-proofs reports nothing finer), `rate_labels_per_s` is 0 and `eta_seconds` comes
//! from the cost model ([`Progress::for_proofs`]). `state` is `running`, `done` or `failed`;
//! `rate_labels_per_s` counts sector-labels (one label of one sector) per second over this run.

#![warn(missing_docs)]

use prometheus::{CounterVec, Gauge, GaugeVec, IntCounter, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
use sealer_config::BatchConfig;
use sealer_error::SealerError;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Where the run's large buffers live.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BufferBacking {
    /// 1 GiB hugepages mapped.
    pub hugepages_mapped: usize,
    /// Buffer bytes on those hugepages.
    pub hugepage_bytes: usize,
    /// Buffer bytes on ordinary pages.
    pub heap_bytes: usize,
}

impl BufferBacking {
    /// One line for the log.
    pub fn describe(&self) -> String {
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        format!(
            "buffers: {:.1} MiB on {} x 1 GiB hugepages, {:.1} MiB on ordinary pages",
            mib(self.hugepage_bytes),
            self.hugepages_mapped,
            mib(self.heap_bytes)
        )
    }
}

/// Live counters the orchestrator and the metrics endpoint read.
#[derive(Default)]
pub struct LiveStats {
    /// Nodes (rows of all sectors) written in the current layer.
    pub nodes_done: AtomicU64,
    /// Pages read from storage for parents (total).
    pub pages_read: AtomicU64,
    /// Pages read sequentially into the resident part of the previous layer (total).
    pub resident_pages_read: AtomicU64,
    /// Pages written (total).
    pub pages_written: AtomicU64,
    /// Per-hasher busy nanoseconds (total).
    pub hasher_busy_ns: Mutex<Vec<u64>>,
    /// CPU nanoseconds the reader thread used (total): resolving parents, submitting and
    /// reaping reads.
    pub reader_cpu_ns: AtomicU64,
    /// I/O errors seen.
    pub io_errors: AtomicU64,
}

/// Progress of a run.
#[derive(Clone, Debug)]
pub struct Progress {
    phase: &'static str,
    layers: usize,
    layer: usize,
    nodes: u64,
    sectors: usize,
    sector_size: u64,
    layer_nodes_done: u64,
    layers_done_at_start: usize,
    state: &'static str,
    error: Option<String>,
    start: Instant,
    /// Estimated seconds per unit ("layer") of a phase without a rate of its own (proofs).
    unit_seconds: Option<f64>,
}

impl Progress {
    /// New progress for a batch with `done` layers already complete.
    pub fn new(cfg: &BatchConfig, layers: usize, done: usize) -> Self {
        Progress {
            phase: "pc1",
            layers,
            layer: done.max(1).min(layers),
            nodes: cfg.nodes(),
            sectors: cfg.sectors.len(),
            sector_size: cfg.sector_size,
            layer_nodes_done: if done > 0 { cfg.nodes() } else { 0 },
            layers_done_at_start: done,
            state: "running",
            error: None,
            start: Instant::now(),
            unit_seconds: None,
        }
    }
    /// Progress of PC2: `units` base trees of `nodes` nodes each ("layer" k of L is base tree
    /// k of T in the JSON).
    pub fn for_pc2(cfg: &BatchConfig, units: usize, nodes: u64) -> Self {
        let mut p = Progress::new(cfg, units, 0);
        p.phase = "pc2";
        p.nodes = nodes;
        p
    }
    /// Progress of the synthetic proofs after PC2: the batch's sectors one after another
    /// ("layer" k of L is sector k of the batch in the JSON), each estimated at
    /// `seconds_per_sector` (None: no estimate, `eta_seconds` null). No rate, and no progress
    /// within a sector.
    pub fn for_proofs(cfg: &BatchConfig, seconds_per_sector: Option<f64>) -> Self {
        let mut p = Progress::new(cfg, cfg.sectors.len(), 0);
        p.phase = "proofs";
        p.nodes = 1;
        p.unit_seconds = seconds_per_sector;
        p
    }
    /// A layer starts.
    pub fn start_layer(&mut self, l: usize) {
        self.layer = l;
        self.layer_nodes_done = 0;
    }
    /// Nodes of the current layer written.
    pub fn update(&mut self, nodes_done: u64) {
        self.layer_nodes_done = nodes_done.min(self.nodes);
    }
    /// Run complete.
    pub fn finish(&mut self) {
        self.layer = self.layers;
        self.layer_nodes_done = self.nodes;
        self.state = "done";
    }
    /// Run failed.
    pub fn fail(&mut self, e: &str) {
        self.state = "failed";
        self.error = Some(e.to_string());
    }

    /// Sector-labels computed in this run (layers finished before it not counted).
    pub fn labels_this_run(&self) -> u64 {
        let done = self.layer.saturating_sub(1) as u64 * self.nodes + self.layer_nodes_done;
        done.saturating_sub(self.layers_done_at_start as u64 * self.nodes) * self.sectors as u64
    }

    /// The JSON document.
    pub fn to_json(&self) -> serde_json::Value {
        let total = self.layers as f64 * self.nodes as f64;
        let done_nodes = (self.layer.saturating_sub(1)) as f64 * self.nodes as f64 + self.layer_nodes_done as f64;
        let run_nodes = done_nodes - self.layers_done_at_start as f64 * self.nodes as f64;
        let el = self.start.elapsed().as_secs_f64();
        let modelled = self.phase == "proofs";
        let rate = if el > 0.0 && run_nodes > 0.0 && !modelled { run_nodes * self.sectors as f64 / el } else { 0.0 };
        let remaining = (total - done_nodes) * self.sectors as f64;
        let eta = if self.state == "done" {
            Some(0.0)
        } else if modelled {
            self.unit_seconds.map(|s| s * (total - done_nodes) / self.nodes as f64)
        } else if rate > 0.0 {
            Some(remaining / rate)
        } else {
            None
        };
        serde_json::json!({
            "schema": 1,
            "phase": self.phase,
            "state": self.state,
            "layer": self.layer,
            "layers": self.layers,
            "layer_percent": 100.0 * self.layer_nodes_done as f64 / self.nodes as f64,
            "percent": 100.0 * done_nodes / total,
            "rate_labels_per_s": rate,
            "eta_seconds": eta,
            "sectors": self.sectors,
            "sector_size": self.sector_size,
            "elapsed_seconds": el,
            "error": self.error,
            "updated_unix": SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        })
    }
}

struct Shared {
    doc: serde_json::Value,
    metrics: Metrics,
    stats: Option<Arc<LiveStats>>,
    /// PC1 sector-labels of this run (from the published progress; never decreases).
    labels_total: u64,
    /// The CPUs the run is pinned to (`cpus` in the document).
    cpus: Option<serde_json::Value>,
    /// Where the buffers live (`buffers` in the document, `sealer_buffer_bytes`).
    buffers: Option<BufferBacking>,
}

/// Where progress goes: file, HTTP endpoint, terminal.
pub struct ProgressSink {
    file: Option<PathBuf>,
    bar: bool,
    shared: Arc<Mutex<Shared>>,
}

impl ProgressSink {
    /// Set up the sinks the config asks for; binds the metrics port now so a busy port fails
    /// before any work.
    pub fn new(cfg: &BatchConfig, bar: bool) -> Result<Self, SealerError> {
        let shared = Arc::new(Mutex::new(Shared {
            doc: serde_json::json!({"phase": "pc1", "state": "starting"}),
            metrics: Metrics::new(),
            stats: None,
            labels_total: 0,
            cpus: None,
            buffers: None,
        }));
        if let Some(port) = cfg.metrics_port {
            let l = std::net::TcpListener::bind((cfg.metrics_address, port))
                .map_err(|e| SealerError::Input(format!("metrics_port {port}: cannot listen: {e}")))?;
            let server = tiny_http::Server::from_listener(l, None)
                .map_err(|e| SealerError::Input(format!("metrics_port {port}: {e}")))?;
            let sh = shared.clone();
            std::thread::Builder::new()
                .name("sealer-http".into())
                .spawn(move || serve(server, sh))
                .map_err(|e| SealerError::Internal(e.to_string()))?;
        }
        if let Some(p) = &cfg.progress_file {
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).map_err(|e| SealerError::Io(format!("creating {}: {e}", d.display())))?;
            }
        }
        Ok(ProgressSink { file: cfg.progress_file.clone(), bar: bar && std::io::stderr().is_terminal(), shared })
    }

    /// Expose live counters on `/metrics`.
    pub fn attach_stats(&self, s: Arc<LiveStats>) {
        self.shared.lock().unwrap().stats = Some(s);
    }

    /// Report the CPUs the run is pinned to in every later document (`cpus`).
    pub fn set_cpus(&self, fit: &sealer_config::CpuFit) {
        self.shared.lock().unwrap().cpus = serde_json::to_value(fit).ok();
    }

    /// Report where the buffers live in every later document (`buffers`) and on `/metrics`.
    pub fn set_buffers(&self, b: &BufferBacking) {
        self.shared.lock().unwrap().buffers = Some(b.clone());
    }

    /// The progress document of `p`, with the CPUs and buffers reported so far: what the file
    /// and `/progress` hold (the operator's contract, `contracts/sealer-progress.json`).
    pub fn document(&self, p: &Progress) -> serde_json::Value {
        let mut doc = p.to_json();
        let sh = self.shared.lock().unwrap();
        if let Some(c) = sh.cpus.clone() {
            doc["cpus"] = c;
        }
        if let Some(b) = &sh.buffers {
            doc["buffers"] = serde_json::json!(b);
        }
        doc
    }

    /// Publish a progress snapshot.
    pub fn publish(&self, p: &Progress) {
        let doc = self.document(p);
        if let Some(path) = &self.file {
            let tmp = path.with_extension("tmp");
            if std::fs::write(&tmp, doc.to_string()).is_ok() {
                let _ = std::fs::rename(&tmp, path);
            }
        }
        if self.bar {
            let pct = doc["layer_percent"].as_f64().unwrap_or(0.0);
            let w = 30usize;
            let fill = ((pct / 100.0) * w as f64) as usize;
            let eta = doc["eta_seconds"].as_f64().map(|e| format!("{:.0}s", e)).unwrap_or_else(|| "?".into());
            eprint!(
                "\r{} {}/{} [{}{}] {:5.1}%  {:.2} M labels/s  ETA {}   ",
                match doc["phase"].as_str() {
                    Some("pc2") => "pc2 tree",
                    Some("proofs") => "proofs sector",
                    _ => "pc1 layer",
                },
                doc["layer"],
                doc["layers"],
                "#".repeat(fill.min(w)),
                " ".repeat(w - fill.min(w)),
                pct,
                doc["rate_labels_per_s"].as_f64().unwrap_or(0.0) / 1e6,
                eta
            );
            let _ = std::io::stderr().flush();
        }
        let mut sh = self.shared.lock().unwrap();
        if p.phase == "pc1" {
            sh.labels_total = sh.labels_total.max(p.labels_this_run());
        }
        sh.doc = doc;
    }

    /// End the terminal line.
    pub fn close(&self) {
        if self.bar {
            eprintln!();
        }
    }
}

/// The sealer's Prometheus metrics (classic text exposition): registered once, brought up to
/// date from the progress document and the engine's live counters at every scrape. Ratios are
/// 0..1, what accumulates is a counter named `_total` (rates come from `rate()`), and every
/// metric has HELP.
struct Metrics {
    registry: Registry,
    phase: IntGaugeVec,
    layer: IntGauge,
    layers: IntGauge,
    progress: Gauge,
    labels: IntCounter,
    eta: Gauge,
    read_pages: IntCounter,
    read_bytes: IntCounter,
    written_pages: IntCounter,
    io_errors: IntCounter,
    busy_seconds: CounterVec,
    busy_ratio: GaugeVec,
    buffer_bytes: IntGaugeVec,
}

impl Metrics {
    fn new() -> Metrics {
        let registry = Registry::new();
        fn reg<M: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: prometheus::Result<M>) -> M {
            let m = m.expect("valid metric definition");
            r.register(Box::new(m.clone())).expect("metric registered once");
            m
        }
        let r = &registry;
        Metrics {
            phase: reg(
                r,
                IntGaugeVec::new(
                    Opts::new("sealer_phase_info", "Current phase and state (labels); always 1."),
                    &["phase", "state"],
                ),
            ),
            layer: reg(
                r,
                IntGauge::new(
                    "sealer_layer",
                    "Layer being labelled in PC1 (base tree being built in PC2, sector being proven in proofs), 1-based.",
                ),
            ),
            layers: reg(
                r,
                IntGauge::new("sealer_layers", "Layers of the batch in PC1 (base trees in PC2, sectors in proofs)."),
            ),
            progress: reg(r, Gauge::new("sealer_progress_ratio", "Fraction of the current phase done, 0 to 1.")),
            labels: reg(
                r,
                IntCounter::new(
                    "sealer_labels_total",
                    "Sector-labels (one node of one sector) computed by PC1 in this run; rate() is the labelling rate.",
                ),
            ),
            eta: reg(r, Gauge::new("sealer_eta_seconds", "Estimated seconds until the current phase ends.")),
            read_pages: reg(r, IntCounter::new("sealer_read_pages_total", "4 KiB pages read from the layer storage.")),
            read_bytes: reg(r, IntCounter::new("sealer_read_bytes_total", "Bytes read from the layer storage.")),
            written_pages: reg(
                r,
                IntCounter::new("sealer_written_pages_total", "4 KiB pages written to the layer storage."),
            ),
            io_errors: reg(r, IntCounter::new("sealer_io_errors_total", "Layer storage I/O errors.")),
            busy_seconds: reg(
                r,
                CounterVec::new(
                    Opts::new("sealer_hasher_busy_seconds_total", "Seconds each hasher thread spent hashing."),
                    &["thread"],
                ),
            ),
            buffer_bytes: reg(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "sealer_buffer_bytes",
                        "Bytes of the PC1 buffers (node cache, resident part of the previous layer, read slots) by backing: hugetlb (1 GiB hugepages) or heap (ordinary pages).",
                    ),
                    &["backing"],
                ),
            ),
            busy_ratio: reg(
                r,
                GaugeVec::new(
                    Opts::new(
                        "sealer_hasher_busy_ratio",
                        "Fraction of this run's wall time each hasher thread spent hashing, 0 to 1.",
                    ),
                    &["thread"],
                ),
            ),
            registry,
        }
    }
}

/// Raise a counter to `total` (the sources are running totals that never decrease).
fn raise(c: &IntCounter, total: u64) {
    c.inc_by(total.saturating_sub(c.get()));
}

/// The text exposition of the current state.
fn metrics_text(sh: &Shared) -> String {
    let (d, m) = (&sh.doc, &sh.metrics);
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    m.phase.reset();
    m.phase.with_label_values(&[d["phase"].as_str().unwrap_or(""), d["state"].as_str().unwrap_or("")]).set(1);
    m.layer.set(num(&d["layer"]) as i64);
    m.layers.set(num(&d["layers"]) as i64);
    m.progress.set((num(&d["percent"]) / 100.0).clamp(0.0, 1.0));
    raise(&m.labels, sh.labels_total);
    m.eta.set(num(&d["eta_seconds"]));
    if let Some(b) = &sh.buffers {
        m.buffer_bytes.with_label_values(&["hugetlb"]).set(b.hugepage_bytes as i64);
        m.buffer_bytes.with_label_values(&["heap"]).set(b.heap_bytes as i64);
    }
    if let Some(st) = &sh.stats {
        let pages_read = st.pages_read.load(Ordering::Relaxed);
        raise(&m.read_pages, pages_read);
        raise(&m.read_bytes, pages_read * 4096);
        raise(&m.written_pages, st.pages_written.load(Ordering::Relaxed));
        raise(&m.io_errors, st.io_errors.load(Ordering::Relaxed));
        let el = num(&d["elapsed_seconds"]).max(1e-9);
        for (i, &ns) in st.hasher_busy_ns.lock().unwrap().iter().enumerate() {
            let thread = i.to_string();
            let c = m.busy_seconds.with_label_values(&[&thread]);
            let secs = ns as f64 / 1e9;
            if secs > c.get() {
                c.inc_by(secs - c.get());
            }
            m.busy_ratio.with_label_values(&[&thread]).set((secs / el).min(1.0));
        }
    }
    TextEncoder::new().encode_to_string(&m.registry.gather()).unwrap_or_default()
}

/// Serve `/progress` (JSON), `/metrics` (Prometheus text) and `/healthz`.
fn serve(server: tiny_http::Server, sh: Arc<Mutex<Shared>>) {
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("/").to_string();
        let (code, ctype, body) = {
            let g = sh.lock().unwrap();
            match path.as_str() {
                "/progress" => (200, "application/json", g.doc.to_string()),
                "/metrics" => (200, prometheus::TEXT_FORMAT, metrics_text(&g)),
                "/healthz" => (200, "text/plain", "ok\n".to_string()),
                _ => (404, "text/plain", "try /progress or /metrics\n".to_string()),
            }
        };
        let header = tiny_http::Header::from_bytes("Content-Type", ctype).expect("valid header");
        let _ = req.respond(tiny_http::Response::from_string(body).with_status_code(code).with_header(header));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exposition follows Prometheus conventions: every metric has HELP, counters end in
    /// `_total`, the progress is a 0..1 ratio. (The CLI test runs `promtool check metrics` on
    /// a live scrape of the same text.)
    #[test]
    fn metrics_follow_prometheus_conventions() {
        let stats = Arc::new(LiveStats::default());
        stats.pages_read.store(10, Ordering::Relaxed);
        *stats.hasher_busy_ns.lock().unwrap() = vec![2_000_000_000, 500_000_000];
        let sh = Shared {
            metrics: Metrics::new(),
            doc: serde_json::json!({"phase": "pc1", "state": "running", "layer": 3, "layers": 11,
                "percent": 22.5, "eta_seconds": 60.0, "elapsed_seconds": 4.0}),
            stats: Some(stats),
            labels_total: 1234,
            cpus: None,
            buffers: Some(BufferBacking { hugepages_mapped: 1, hugepage_bytes: 3 << 20, heap_bytes: 4096 }),
        };
        let text = metrics_text(&sh);
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split_whitespace().nth(2).unwrap();
            assert!(text.contains(&format!("# HELP {name} ")), "{name} has no HELP:\n{text}");
            if line.ends_with(" counter") {
                assert!(name.ends_with("_total"), "counter {name} is not named _total");
            }
        }
        assert!(text.contains("sealer_progress_ratio 0.225\n"), "{text}");
        assert!(text.contains("sealer_labels_total 1234\n"), "{text}");
        assert!(text.contains("sealer_hasher_busy_ratio{thread=\"0\"} 0.5\n"), "{text}");
        assert!(text.contains("sealer_read_bytes_total 40960\n"), "{text}");
        assert!(text.contains("sealer_buffer_bytes{backing=\"hugetlb\"} 3145728\n"), "{text}");
    }

    fn progress(phase: &'static str, layer_nodes_done: u64) -> Progress {
        Progress {
            phase,
            layers: 2,
            layer: 1,
            nodes: 100,
            sectors: 8,
            sector_size: 8 << 20,
            layer_nodes_done,
            layers_done_at_start: 0,
            state: "running",
            error: None,
            start: Instant::now() - std::time::Duration::from_secs(1),
            unit_seconds: None,
        }
    }

    /// The documents have exactly the keys of the operator's contract examples
    /// (contracts/sealer-progress.json, which the operator's tests read): PC1 running, pinned,
    /// with buffers; PC2 before a rate; PC2 failed; synthetic proofs running (sector 2 of 8).
    /// eta_seconds is null exactly when theirs is.
    #[test]
    fn documents_are_the_operators_contract() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/sealer-progress.json");
        let contract: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let sink = |pinned: bool| {
            ProgressSink {
                file: None,
                bar: false,
                shared: Arc::new(Mutex::new(Shared {
                    doc: serde_json::Value::Null,
                    metrics: Metrics::new(),
                    stats: None,
                    labels_total: 0,
                    cpus: None,
                    buffers: None,
                })),
            }
            .pinned(pinned)
        };
        let mut failed = progress("pc2", 50);
        failed.fail("storage error: reading layer pages: Input/output error");
        let mut proofs = Progress::for_proofs(&config(8), Some(850.0));
        proofs.start_layer(2);
        let docs = [
            sink(true).document(&progress("pc1", 40)),
            sink(false).document(&progress("pc2", 0)),
            sink(false).document(&failed),
            sink(false).document(&proofs),
        ];
        let keys = |v: &serde_json::Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
            k.sort();
            k
        };
        assert_eq!(contract["examples"].as_array().unwrap().len(), docs.len(), "an example per case");
        for (i, got) in docs.iter().enumerate() {
            let want = &contract["examples"][i];
            assert_eq!(keys(got), keys(want), "document {got}\nagainst the contract's example {i}: {want}");
            for nested in ["cpus", "buffers"] {
                assert_eq!(keys(&got[nested]), keys(&want[nested]), "{nested} of example {i}");
            }
            assert_eq!(got["eta_seconds"].is_null(), want["eta_seconds"].is_null(), "eta_seconds of example {i}");
            assert_eq!((&got["phase"], &got["state"]), (&want["phase"], &want["state"]), "example {i}");
        }
        // The proofs example's figures are the model's: sector 2 of 8 at 850 s each.
        for k in ["layer", "layers", "layer_percent", "percent", "rate_labels_per_s", "eta_seconds"] {
            assert_eq!(docs[3][k].as_f64(), contract["examples"][3][k].as_f64(), "{k} of the proofs example");
        }
    }

    /// A config of `n` 8 MiB sectors.
    fn config(n: usize) -> BatchConfig {
        let v = serde_json::json!({
            "registered_proof": "StackedDrg8MiBV1_1_Feat_SyntheticPoRep",
            "sectors": (0..n).map(|i| serde_json::json!({"prover_id": "00".repeat(32), "sector_id": i, "ticket": "11".repeat(32)})).collect::<Vec<_>>(),
            "layers": {"paths": ["/dev/null"], "slot_offset": 0}, "output_dir": "/out"
        });
        BatchConfig::from_json(&v.to_string()).unwrap()
    }

    /// The proofs phase counts sectors: none done within one, the share of sectors done, no
    /// rate, the remaining sectors (this one included) at the model's seconds each.
    #[test]
    fn proofs_count_sectors() {
        let mut p = Progress::for_proofs(&config(4), Some(850.0));
        p.start_layer(3);
        let d = p.to_json();
        assert_eq!(
            (d["phase"].as_str(), d["layer"].as_u64(), d["layers"].as_u64()),
            (Some("proofs"), Some(3), Some(4))
        );
        assert_eq!((d["layer_percent"].as_f64(), d["percent"].as_f64()), (Some(0.0), Some(50.0)));
        assert_eq!((d["rate_labels_per_s"].as_f64(), d["eta_seconds"].as_f64()), (Some(0.0), Some(2.0 * 850.0)));
        assert!(Progress::for_proofs(&config(4), None).to_json()["eta_seconds"].is_null());
        p.finish();
        let d = p.to_json();
        assert_eq!(
            (d["state"].as_str(), d["percent"].as_f64(), d["eta_seconds"].as_f64()),
            (Some("done"), Some(100.0), Some(0.0))
        );
    }

    impl ProgressSink {
        /// The sink after a PC1 start pinned its threads and mapped its buffers.
        fn pinned(self, yes: bool) -> Self {
            if yes {
                let fit = sealer_config::CpuFit {
                    granted: "0-3".into(),
                    l3_groups: vec!["0-3".into()],
                    moved: [(5, 1)].into_iter().collect(),
                };
                self.set_cpus(&fit);
                self.set_buffers(&BufferBacking { hugepages_mapped: 1, hugepage_bytes: 1 << 30, heap_bytes: 4096 });
            }
            self
        }
    }

    #[test]
    fn labels_this_run_skip_resumed_layers() {
        let mut p = Progress {
            phase: "pc1",
            layers: 4,
            layer: 3,
            nodes: 100,
            sectors: 8,
            sector_size: 2048,
            layer_nodes_done: 40,
            layers_done_at_start: 2,
            state: "running",
            error: None,
            start: Instant::now(),
            unit_seconds: None,
        };
        assert_eq!(p.labels_this_run(), 40 * 8);
        p.start_layer(4);
        p.update(100);
        assert_eq!(p.labels_this_run(), 200 * 8); // layer 3 whole, layer 4 whole
    }
}
