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
        let shared =
            Arc::new(Mutex::new(Shared { doc: serde_json::json!({"phase": "pc1", "state": "starting"}), stats: None }));
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

    /// Publish a progress snapshot.
    pub fn publish(&self, p: &Progress) {
        let doc = p.to_json();
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
        self.shared.lock().unwrap().doc = doc;
    }

    /// End the terminal line.
    pub fn close(&self) {
        if self.bar {
            eprintln!();
        }
    }
}

fn metrics_text(sh: &Shared) -> String {
    let d = &sh.doc;
    let mut s = String::new();
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
    s += "# HELP sealer_phase_info Current phase (label) and state.\n# TYPE sealer_phase_info gauge\n";
    s += &format!(
        "sealer_phase_info{{phase=\"{}\",state=\"{}\"}} 1\n",
        d["phase"].as_str().unwrap_or(""),
        d["state"].as_str().unwrap_or("")
    );
    s += &format!("# TYPE sealer_layer gauge\nsealer_layer {}\n", num(&d["layer"]));
    s += &format!("# TYPE sealer_layers gauge\nsealer_layers {}\n", num(&d["layers"]));
    s += &format!("# TYPE sealer_percent gauge\nsealer_percent {}\n", num(&d["percent"]));
    s += &format!("# TYPE sealer_labels_per_second gauge\nsealer_labels_per_second {}\n", num(&d["rate_labels_per_s"]));
    s += &format!("# TYPE sealer_eta_seconds gauge\nsealer_eta_seconds {}\n", num(&d["eta_seconds"]));
    if let Some(st) = &sh.stats {
        s += &format!(
            "# TYPE sealer_read_pages_total counter\nsealer_read_pages_total {}\n",
            st.pages_read.load(Ordering::Relaxed)
        );
        s += &format!(
            "# TYPE sealer_read_bytes_total counter\nsealer_read_bytes_total {}\n",
            st.pages_read.load(Ordering::Relaxed) * 4096
        );
        s += &format!(
            "# TYPE sealer_written_pages_total counter\nsealer_written_pages_total {}\n",
            st.pages_written.load(Ordering::Relaxed)
        );
        s += &format!(
            "# TYPE sealer_io_errors_total counter\nsealer_io_errors_total {}\n",
            st.io_errors.load(Ordering::Relaxed)
        );
        let el = num(&d["elapsed_seconds"]).max(1e-9);
        s += "# HELP sealer_hasher_busy_ratio Fraction of wall time each hasher thread spent hashing.\n# TYPE sealer_hasher_busy_ratio gauge\n";
        for (i, b) in st.hasher_busy_ns.lock().unwrap().iter().enumerate() {
            s += &format!("sealer_hasher_busy_ratio{{thread=\"{i}\"}} {:.4}\n", (*b as f64 / 1e9 / el).min(1.0));
        }
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
