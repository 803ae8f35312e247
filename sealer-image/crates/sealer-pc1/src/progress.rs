//! Progress reporting: a JSON document (file and/or HTTP `/progress`), Prometheus text
//! (`/metrics`) and a terminal progress line.
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
//! 512 MiB). `state` is `running`, `done` or `failed`; `rate_labels_per_s` counts sector-labels (one
//! label of one sector) per second over this run.

use crate::engine::LiveStats;
use crate::Pc1Error;
use sealer_config::BatchConfig;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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
        let rate = if el > 0.0 && run_nodes > 0.0 { run_nodes * self.sectors as f64 / el } else { 0.0 };
        let remaining = (total - done_nodes) * self.sectors as f64;
        let eta = if self.state == "done" {
            Some(0.0)
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
    stats: Option<Arc<LiveStats>>,
    /// PC1 sector-labels of this run (from the published progress; never decreases).
    labels_total: u64,
    /// The CPUs the run is pinned to (`cpus` in the document).
    cpus: Option<serde_json::Value>,
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
    pub fn new(cfg: &BatchConfig, bar: bool) -> Result<Self, Pc1Error> {
        let shared = Arc::new(Mutex::new(Shared {
            doc: serde_json::json!({"phase": "pc1", "state": "starting"}),
            stats: None,
            labels_total: 0,
            cpus: None,
        }));
        if let Some(port) = cfg.metrics_port {
            let l = std::net::TcpListener::bind((cfg.metrics_address, port))
                .map_err(|e| Pc1Error::Input(format!("metrics_port {port}: cannot listen: {e}")))?;
            let sh = shared.clone();
            std::thread::Builder::new()
                .name("sealer-http".into())
                .spawn(move || serve(l, sh))
                .map_err(|e| Pc1Error::Internal(e.to_string()))?;
        }
        if let Some(p) = &cfg.progress_file {
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).map_err(|e| Pc1Error::Io(format!("creating {}: {e}", d.display())))?;
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

    /// Publish a progress snapshot.
    pub fn publish(&self, p: &Progress) {
        let mut doc = p.to_json();
        if let Some(c) = self.shared.lock().unwrap().cpus.clone() {
            doc["cpus"] = c;
        }
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
                if doc["phase"] == "pc2" { "pc2 tree" } else { "pc1 layer" },
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

/// Prometheus text exposition: HELP and TYPE on every metric, ratios in 0..1, counters (named
/// `_total`) for what accumulates, so rates are taken by `rate()` and not reported as gauges.
fn metrics_text(sh: &Shared) -> String {
    let d = &sh.doc;
    let mut s = String::new();
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        s += &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n");
        for (labels, v) in samples {
            s += &format!("{name}{labels} {v}\n");
        }
    };
    let one = |v: f64| [(String::new(), v)];
    metric(
        "sealer_phase_info",
        "gauge",
        "Current phase and state (labels); always 1.",
        &[(
            format!(
                "{{phase=\"{}\",state=\"{}\"}}",
                d["phase"].as_str().unwrap_or(""),
                d["state"].as_str().unwrap_or("")
            ),
            1.0,
        )],
    );
    metric(
        "sealer_layer",
        "gauge",
        "Layer being labelled in PC1 (base tree being built in PC2), 1-based.",
        &one(num(&d["layer"])),
    );
    metric("sealer_layers", "gauge", "Layers of the batch in PC1 (base trees in PC2).", &one(num(&d["layers"])));
    metric(
        "sealer_progress_ratio",
        "gauge",
        "Fraction of the current phase done, 0 to 1.",
        &one((num(&d["percent"]) / 100.0).clamp(0.0, 1.0)),
    );
    metric(
        "sealer_labels_total",
        "counter",
        "Sector-labels (one node of one sector) computed by PC1 in this run; rate() is the labelling rate.",
        &one(sh.labels_total as f64),
    );
    metric(
        "sealer_eta_seconds",
        "gauge",
        "Estimated seconds until the current phase ends.",
        &one(num(&d["eta_seconds"])),
    );
    if let Some(st) = &sh.stats {
        let pages_read = st.pages_read.load(Ordering::Relaxed) as f64;
        metric("sealer_read_pages_total", "counter", "4 KiB pages read from the layer storage.", &one(pages_read));
        metric("sealer_read_bytes_total", "counter", "Bytes read from the layer storage.", &one(pages_read * 4096.0));
        metric(
            "sealer_written_pages_total",
            "counter",
            "4 KiB pages written to the layer storage.",
            &one(st.pages_written.load(Ordering::Relaxed) as f64),
        );
        metric(
            "sealer_io_errors_total",
            "counter",
            "Layer storage I/O errors.",
            &one(st.io_errors.load(Ordering::Relaxed) as f64),
        );
        let el = num(&d["elapsed_seconds"]).max(1e-9);
        let busy = st.hasher_busy_ns.lock().unwrap().clone();
        let threads = |f: &dyn Fn(u64) -> f64| -> Vec<(String, f64)> {
            busy.iter().enumerate().map(|(i, b)| (format!("{{thread=\"{i}\"}}"), f(*b))).collect()
        };
        metric(
            "sealer_hasher_busy_seconds_total",
            "counter",
            "Seconds each hasher thread spent hashing.",
            &threads(&|b| b as f64 / 1e9),
        );
        metric(
            "sealer_hasher_busy_ratio",
            "gauge",
            "Fraction of this run's wall time each hasher thread spent hashing, 0 to 1.",
            &threads(&|b| (b as f64 / 1e9 / el).min(1.0)),
        );
    }
    s
}

fn serve(l: std::net::TcpListener, sh: Arc<Mutex<Shared>>) {
    for conn in l.incoming() {
        let Ok(mut c) = conn else { continue };
        let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
        let mut buf = [0u8; 2048];
        let n = c.read(&mut buf).unwrap_or(0);
        let req = String::from_utf8_lossy(&buf[..n]);
        let path = req.split_whitespace().nth(1).unwrap_or("/");
        let (code, ctype, body) = {
            let g = sh.lock().unwrap();
            match path {
                "/progress" => ("200 OK", "application/json", g.doc.to_string()),
                "/metrics" => ("200 OK", "text/plain; version=0.0.4", metrics_text(&g)),
                "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
                _ => ("404 Not Found", "text/plain", "try /progress or /metrics\n".to_string()),
            }
        };
        let _ = write!(
            c,
            "HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
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
            doc: serde_json::json!({"phase": "pc1", "state": "running", "layer": 3, "layers": 11,
                "percent": 22.5, "eta_seconds": 60.0, "elapsed_seconds": 4.0}),
            stats: Some(stats),
            labels_total: 1234,
            cpus: None,
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
        };
        assert_eq!(p.labels_this_run(), 40 * 8);
        p.start_layer(4);
        p.update(100);
        assert_eq!(p.labels_this_run(), 200 * 8); // layer 3 whole, layer 4 whole
    }
}
