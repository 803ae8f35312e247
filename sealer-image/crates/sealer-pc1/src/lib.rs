//! Batch PC1 for the sealfleet sealer: stacked-DRG labels of N sectors at once, bit-identical
//! to rust-fil-proofs, on interleaved page storage.
//!
//! Storage layout: a 4 KiB page holds `4096 / (N·32)` consecutive nodes; each row is node `v`
//! of every sector (sector `s` at byte `s·32` of the row). Pages are striped over the layer
//! paths ([`sealer_storage::Stripe`]).
//!
//! Entry points: [`run_pc1`] (label every layer, resumable at layer granularity),
//! [`export_layers`] (rust-fil-proofs layer files), [`verify_nodes`] (recompute random labels
//! from stored parents).

#![warn(missing_docs)]

pub mod engine;
pub mod geometry;
pub mod progress;
pub mod state;
pub mod sync;

use engine::{Buffers, LiveStats, ThreadPlan};
pub use geometry::{Geometry, Tuning};
pub use progress::{Progress, ProgressSink};
use sealer_config::{ApiVersion, BatchConfig};
use sealer_graph::{GraphApi, Parents};
use sealer_hash::{Kernel, LabelHasher};
use sealer_storage::{AlignedBuf, Devices, HugeArena, PageBackend, PageIo, Stripe, UringBackend, HUGEPAGE, PAGE};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// Errors of a PC1 run, grouped by what the operator should do about them.
#[derive(Debug, thiserror::Error)]
pub enum Pc1Error {
    /// Bad input (config, layout vs this machine). Fix the input.
    #[error("invalid input: {0}")]
    Input(String),
    /// The CPU lacks what the hot path needs (SHA-NI).
    #[error("unsupported machine: {0}")]
    Unsupported(String),
    /// Storage or file-system failure.
    #[error("storage error: {0}")]
    Io(String),
    /// The node's parent cache is missing, unverified or corrupt: rebuild it, then retry.
    #[error("parent cache: {0}")]
    ParentCache(String),
    /// A data sector's staged file or comm_d disagrees with its pieces: fix the data or the
    /// piece list; the same input fails again.
    #[error("data mismatch: {0}")]
    DataMismatch(String),
    /// PC2's GPU engine has no usable OpenCL device, or its device failed (lost, out of
    /// memory): the message names the device. Never a silent fall back to the CPU.
    #[error("GPU engine: {0}")]
    Device(String),
    /// Another thread failed first (internal; never returned from [`run_pc1`]).
    #[error("aborted")]
    Aborted,
    /// A bug or unexpected state.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Pc1Error {
    /// Process exit code for this error class: 2 input, 3 I/O, 4 unsupported CPU, 6 parent
    /// cache missing or corrupt, 7 data that does not match its pieces, 8 the GPU engine's
    /// device missing or failed, 1 internal.
    pub fn exit_code(&self) -> i32 {
        match self {
            Pc1Error::Input(_) => 2,
            Pc1Error::Io(_) => 3,
            Pc1Error::Unsupported(_) => 4,
            Pc1Error::ParentCache(_) => 6,
            Pc1Error::DataMismatch(_) => 7,
            Pc1Error::Device(_) => 8,
            Pc1Error::Aborted | Pc1Error::Internal(_) => 1,
        }
    }
}

impl Pc1Error {
    /// The name of [`Pc1Error::exit_code`]'s entry in the exit-code table the operator reads
    /// (`contracts/exit-codes.json`; a test checks both).
    pub fn exit_name(&self) -> &'static str {
        match self {
            Pc1Error::Input(_) => "input",
            Pc1Error::Io(_) => "io",
            Pc1Error::Unsupported(_) => "unsupported",
            Pc1Error::ParentCache(_) => "parent-cache",
            Pc1Error::DataMismatch(_) => "data-mismatch",
            Pc1Error::Device(_) => "device",
            Pc1Error::Aborted | Pc1Error::Internal(_) => "internal",
        }
    }
}

#[cfg(test)]
mod exit_code_contract {
    use super::Pc1Error;

    /// Every error's exit code is the code the operator's table gives its name, and every code
    /// the table lists for an error class is one some error exits with.
    #[test]
    fn exit_codes_are_the_operators_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../contracts/exit-codes.json");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let table: Vec<(i64, String)> = doc["codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["code"].as_i64().unwrap(), c["name"].as_str().unwrap().to_string()))
            .collect();
        let errors = [
            Pc1Error::Input(String::new()),
            Pc1Error::Io(String::new()),
            Pc1Error::Unsupported(String::new()),
            Pc1Error::ParentCache(String::new()),
            Pc1Error::DataMismatch(String::new()),
            Pc1Error::Device(String::new()),
            Pc1Error::Internal(String::new()),
            Pc1Error::Aborted,
        ];
        for e in &errors {
            let want = (e.exit_code() as i64, e.exit_name().to_string());
            assert!(table.contains(&want), "{e:?} exits {} as {}, which {} lacks", want.0, want.1, path.display());
        }
        // The table's codes that are not errors: success, and verify-pc1's mismatches (the CLI's 5).
        for (code, name) in &table {
            let from_errors = errors.iter().any(|e| e.exit_code() as i64 == *code);
            assert!(
                from_errors
                    || (*code, name.as_str()) == (0, "success")
                    || (*code, name.as_str()) == (5, "verify-mismatch"),
                "{} lists exit {code} ({name}), which no sealer error exits with",
                path.display()
            );
        }
    }
}

impl From<sealer_config::ConfigError> for Pc1Error {
    fn from(e: sealer_config::ConfigError) -> Self {
        Pc1Error::Input(e.to_string())
    }
}

/// Options that are not part of the batch config.
#[derive(Clone, Debug)]
pub struct Pc1Options {
    /// Accept the portable (non SHA-NI) kernel when SHA-NI is missing.
    pub allow_portable_hash: bool,
    /// Force the portable kernel (tests of the fallback).
    pub force_portable_hash: bool,
    /// Engine tunables.
    pub tuning: Tuning,
    /// Pin threads per the layout.
    pub pin_threads: bool,
    /// Draw a progress bar on stderr.
    pub progress_bar: bool,
    /// Ignore existing state and start from layer 1.
    pub restart: bool,
    /// io_uring queue depth per backend.
    pub queue_depth: u32,
    /// Stop after this many layers (benchmarks of a few layers of a large batch). The batch is
    /// then unfinished: a later run resumes it, and PC2 cannot run on it before.
    pub max_layers: Option<usize>,
}

impl Default for Pc1Options {
    fn default() -> Self {
        Pc1Options {
            allow_portable_hash: false,
            force_portable_hash: false,
            tuning: Tuning::default(),
            pin_threads: true,
            progress_bar: false,
            restart: false,
            queue_depth: 256,
            max_layers: None,
        }
    }
}

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct Pc1Report {
    /// replica_id per sector, in config order.
    pub replica_ids: Vec<[u8; 32]>,
    /// comm_d per sector.
    pub comm_ds: Vec<[u8; 32]>,
    /// First layer computed in this run (layers before it were already done).
    pub first_layer: usize,
    /// Layers.
    pub layers: usize,
    /// Wall seconds spent labelling in this run.
    pub seconds: f64,
    /// Sector-labels computed in this run.
    pub labels: u64,
    /// Hash kernel used.
    pub kernel: Kernel,
    /// Storage backend name.
    pub backend: String,
    /// Geometry used.
    pub geometry: Geometry,
    /// Hasher threads.
    pub hasher_threads: usize,
    /// The CPUs the threads were pinned to (None when not pinned).
    pub cpus: Option<sealer_config::CpuFit>,
    /// Where the buffers lived (None when no labelling ran).
    pub buffers: Option<BufferBacking>,
    /// 4 KiB pages read at random for parents (this run).
    pub pages_read: u64,
    /// 4 KiB pages read sequentially into the resident part of the previous layer (this run).
    pub resident_pages_read: u64,
    /// What each labelled layer cost, in order.
    pub layer_stats: Vec<LayerStats>,
}

/// What labelling one layer cost: the storage path's figures for `bench pc1`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct LayerStats {
    /// Layer (1-based).
    pub layer: usize,
    /// Wall seconds, from the first read to the layer flushed.
    pub seconds: f64,
    /// Random 4 KiB parent page reads.
    pub pages_read: u64,
    /// Those reads if every page that can hold a parent not in memory were read once
    /// ([`Geometry::min_page_reads`]).
    pub min_pages: u64,
    /// Pages read sequentially into the resident part of the previous layer.
    pub resident_pages_read: u64,
    /// CPU seconds of the reader thread.
    pub reader_cpu_seconds: f64,
    /// Seconds the hasher threads spent hashing, summed over them.
    pub hasher_busy_seconds: f64,
    /// Hasher threads.
    pub hashers: usize,
    /// Sector-labels computed (nodes × sectors).
    pub labels: u64,
}

impl LayerStats {
    /// Random reads per sector-label.
    pub fn reads_per_label(&self) -> f64 {
        self.pages_read as f64 / self.labels.max(1) as f64
    }
    /// [`LayerStats::min_pages`] per sector-label.
    pub fn min_reads_per_label(&self) -> f64 {
        self.min_pages as f64 / self.labels.max(1) as f64
    }
    /// Random reads per second over the layer.
    pub fn iops(&self) -> f64 {
        self.pages_read as f64 / self.seconds.max(1e-9)
    }
    /// Reader CPU microseconds per random read (None without reads).
    pub fn reader_cpu_us_per_read(&self) -> Option<f64> {
        (self.pages_read > 0).then(|| self.reader_cpu_seconds * 1e6 / self.pages_read as f64)
    }
    /// Share of the layer's wall time the hashers were not hashing (waiting for parents, for
    /// the writer, or descheduled).
    pub fn hasher_wait(&self) -> f64 {
        (1.0 - self.hasher_busy_seconds / (self.hashers.max(1) as f64 * self.seconds.max(1e-9))).max(0.0)
    }
}

/// comm_d and replica_id of every sector.
pub fn sector_ids(cfg: &BatchConfig) -> (Vec<[u8; 32]>, Vec<[u8; 32]>) {
    let cc = sealer_hash::cc_comm_d(cfg.sector_size);
    let mut rids = Vec::new();
    let mut cds = Vec::new();
    for s in &cfg.sectors {
        let cd = match (s.comm_d, &s.data) {
            (Some(d), _) => d,
            (None, None) => cc,
            // Never label a data sector under the CC commitment.
            (None, Some(_)) => panic!(
                "sector {}: a data sector's comm_d must be computed from its pieces (sealer_data::resolve_comm_ds) first",
                s.sector_id
            ),
        };
        rids.push(sealer_hash::replica_id(&s.prover_id, s.sector_id, &s.ticket, &cd, &cfg.porep_id));
        cds.push(cd);
    }
    (rids, cds)
}

/// The graph API for a config.
pub fn graph_api(a: ApiVersion) -> GraphApi {
    match a {
        ApiVersion::V1_0_0 => GraphApi::V1_0_0,
        ApiVersion::V1_1_0 => GraphApi::V1_1_0,
        ApiVersion::V1_2_0 => GraphApi::V1_2_0,
    }
}

/// The parent graph of a config: the node's verified cache when the config names the node's
/// cache directory (never built here), else built or reused under `FIL_PROOFS_PARENT_CACHE`.
pub fn open_parents(cfg: &BatchConfig) -> Result<Parents, Pc1Error> {
    match &cfg.parent_cache_dir {
        Some(dir) => sealer_graph::store::open_verified(dir, &cfg.proof_name(), cfg.nodes())
            .map_err(|e| Pc1Error::ParentCache(e.to_string())),
        None => Parents::open(cfg.nodes(), cfg.porep_id, graph_api(cfg.api_version))
            .map_err(|e| Pc1Error::Io(e.to_string())),
    }
}

/// Geometry for a config.
pub fn geometry(cfg: &BatchConfig, t: Tuning) -> Geometry {
    Geometry::new(cfg.nodes(), cfg.sectors.len(), cfg.num_layers(), t)
}

/// The stripe for a config.
pub fn stripe(cfg: &BatchConfig, g: &Geometry) -> Stripe {
    Stripe::new(cfg.layers.paths.len(), cfg.layers.slot_offset, g.ppl)
}

/// Path of the state file.
pub fn state_path(cfg: &BatchConfig) -> PathBuf {
    cfg.output_dir.join("pc1-state.json")
}

fn io_err(what: &str, e: impl std::fmt::Display) -> Pc1Error {
    Pc1Error::Io(format!("{what}: {e}"))
}

/// Run PC1 for the batch: every layer of every sector, resuming after the last layer a
/// previous run completed for the same batch.
pub fn run_pc1(cfg: &BatchConfig, opts: &Pc1Options) -> Result<Pc1Report, Pc1Error> {
    run_pc1_with(cfg, opts, None)
}

/// [`run_pc1`] publishing to an existing progress sink (so `batch` keeps one endpoint for
/// both phases).
pub fn run_pc1_with(cfg: &BatchConfig, opts: &Pc1Options, sink: Option<&ProgressSink>) -> Result<Pc1Report, Pc1Error> {
    // --- checks before any work ---
    let kernel = if opts.force_portable_hash {
        Kernel::Portable
    } else {
        Kernel::select(opts.allow_portable_hash).map_err(|e| Pc1Error::Unsupported(e.to_string()))?
    };
    let mut layout = cfg.effective_layout();
    layout.validate(cfg.sectors.len())?;
    let mut cpus = None;
    if opts.pin_threads {
        // Under the kubelet's `static` CPU manager the granted CPUs are the kubelet's choice.
        let granted = sealer_config::allowed_cpus();
        let (fitted, fit) = layout.fit_to(&granted, &sealer_config::CpuTopology::from_sysfs(&granted))?;
        log::info!("{}", fit.describe());
        layout = fitted;
        cpus = Some(fit);
    }
    let plan = ThreadPlan::from_layout(&layout, opts.pin_threads);
    let g = geometry(cfg, opts.tuning);
    let stripe = stripe(cfg, &g);
    let layers = cfg.num_layers();
    let (rids, cds) = sector_ids(cfg);

    std::fs::create_dir_all(&cfg.output_dir)
        .map_err(|e| io_err(&format!("creating {}", cfg.output_dir.display()), e))?;
    let mut digests = if opts.restart { Vec::new() } else { verified_layers(cfg, true) };
    let done = digests.len();
    let own_sink;
    let sink = match sink {
        Some(s) => s,
        None => {
            own_sink = ProgressSink::new(cfg, opts.progress_bar)?;
            &own_sink
        }
    };
    if let Some(fit) = &cpus {
        sink.set_cpus(fit);
    }
    let mut prog = Progress::new(cfg, layers, done);
    if done == layers {
        prog.finish();
        sink.publish(&prog);
        return Ok(Pc1Report {
            replica_ids: rids,
            comm_ds: cds,
            first_layer: layers + 1,
            layers,
            seconds: 0.0,
            labels: 0,
            kernel,
            backend: "none".into(),
            geometry: g,
            hasher_threads: plan.groups.iter().map(|g| g.hashers.len()).sum(),
            cpus,
            buffers: None,
            pages_read: 0,
            resident_pages_read: 0,
            layer_stats: Vec::new(),
        });
    }
    if done > 0 {
        log::info!("resuming batch at layer {} of {layers}", done + 1);
    }

    // The parent cache is checked before any storage is touched.
    let parents = open_parents(cfg)?;
    let devs = Devices::open(&cfg.layers.paths, stripe.bytes_per_device(layers))
        .map_err(|e| io_err("opening layer storage", e))?;
    let arena = map_hugepages(cfg.hugepages_1gi, Buffers::bytes(&g));
    let bufs = Buffers::new(&g, arena.as_ref());
    let (huge, heap) = bufs.backing();
    let buffers = BufferBacking {
        hugepages_mapped: arena.as_ref().map_or(0, |a| a.mapped() / HUGEPAGE),
        hugepage_bytes: huge,
        heap_bytes: heap,
    };
    log::info!("{}", buffers.describe());
    sink.set_buffers(&buffers);
    let mut be_r = UringBackend::new(devs.clone(), opts.queue_depth).map_err(|e| io_err("creating io_uring", e))?;
    let mut be_w = UringBackend::new(devs.clone(), opts.queue_depth).map_err(|e| io_err("creating io_uring", e))?;
    let regions = bufs.io_regions();
    // SAFETY: the regions are the rings and read slots of `bufs` (AlignedBuf heap memory, valid for
    // their lengths: rings rounded up to whole pages stay within the allocation's capacity), which
    // never move and outlive both backends: `bufs` is declared before `be_r` and `be_w`, so it is
    // dropped after them on every return path.
    unsafe {
        be_r.register_buffers(&regions);
        be_w.register_buffers(&regions);
    }
    let backend = be_r.name().to_string();
    let stats = Arc::new(LiveStats::default());
    sink.attach_stats(stats.clone());
    let saved = engine::SavedAffinity::save();
    if opts.pin_threads {
        engine::pin_to(plan.orchestrator);
    }
    let result = label_layers(
        cfg,
        &g,
        stripe,
        &parents,
        &bufs,
        &rids,
        LabelHasher::new(kernel),
        &plan,
        &mut be_r,
        &mut be_w,
        &stats,
        sink,
        &mut prog,
        &mut digests,
        opts.max_layers,
    );
    if let Some(s) = saved {
        s.restore();
    }
    let (seconds, layer_stats) = result?;
    Ok(Pc1Report {
        replica_ids: rids,
        comm_ds: cds,
        first_layer: done + 1,
        layers,
        seconds,
        labels: layer_stats.iter().map(|l| l.labels).sum(),
        kernel,
        backend,
        geometry: g,
        hasher_threads: plan.groups.iter().map(|g| g.hashers.len()).sum(),
        cpus,
        buffers: Some(buffers),
        pages_read: stats.pages_read.load(std::sync::atomic::Ordering::Relaxed),
        resident_pages_read: stats.resident_pages_read.load(std::sync::atomic::Ordering::Relaxed),
        layer_stats,
    })
}

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

/// Map the 1 GiB hugepages the buffers need, at most `allowed` (the pod's share). None, with
/// a warning when some were allowed, when the node's pool cannot give them: the run then uses
/// ordinary pages, slower but correct.
fn map_hugepages(allowed: usize, bytes: usize) -> Option<HugeArena> {
    if allowed == 0 {
        log::info!("no 1 GiB hugepages given (hugepages_1gi = 0): buffers on ordinary pages");
        return None;
    }
    let pages = allowed.min(bytes.div_ceil(HUGEPAGE).max(1));
    match HugeArena::map(pages) {
        Ok(a) => Some(a),
        Err(e) => {
            log::warn!(
                "cannot map {pages} x 1 GiB hugepages ({e}): falling back to ordinary pages; reserve them                  (hugepagesz=1G hugepages=N, or the node agent's spec.hugepages1GiPerNUMANode)"
            );
            None
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn label_layers(
    cfg: &BatchConfig,
    g: &Geometry,
    stripe: Stripe,
    parents: &Parents,
    bufs: &Buffers,
    rids: &[[u8; 32]],
    hasher: LabelHasher,
    plan: &ThreadPlan,
    be_r: &mut UringBackend,
    be_w: &mut UringBackend,
    stats: &LiveStats,
    sink: &ProgressSink,
    prog: &mut Progress,
    digests: &mut Vec<String>,
    max_layers: Option<usize>,
) -> Result<(f64, Vec<LayerStats>), Pc1Error> {
    let layers = cfg.num_layers();
    let last = max_layers.map_or(layers, |m| m.min(layers));
    let done = digests.len();
    let key = state::batch_key(cfg, rids);
    let spath = state_path(cfg);
    let t0 = Instant::now();
    let mut per_layer = Vec::new();
    let busy_ns = || stats.hasher_busy_ns.lock().map(|b| b.iter().sum::<u64>()).unwrap_or(0);
    for layer in done + 1..=last {
        let start = (Instant::now(), stats.pages_read.load(Relaxed), stats.resident_pages_read.load(Relaxed));
        let (cpu0, busy0) = (stats.reader_cpu_ns.load(Relaxed), busy_ns());
        prog.start_layer(layer);
        sink.publish(prog);
        let mut last = Instant::now();
        // the previous layer is in memory only if this process computed it
        let prev_in_memory = layer > done + 1;
        engine::run_layer(
            g,
            layer as u32,
            parents,
            stripe,
            bufs,
            rids,
            hasher,
            plan,
            be_r,
            be_w,
            stats,
            prev_in_memory,
            |nodes| {
                if last.elapsed().as_millis() >= 250 {
                    prog.update(nodes);
                    sink.publish(prog);
                    last = Instant::now();
                }
            },
        )
        .inspect_err(|e| {
            prog.fail(&e.to_string());
            sink.publish(prog);
        })?;
        prog.update(g.nodes);
        be_w.flush().map_err(|e| io_err("flushing layer storage", e))?;
        per_layer.push(LayerStats {
            layer,
            seconds: start.0.elapsed().as_secs_f64(),
            pages_read: stats.pages_read.load(Relaxed) - start.1,
            min_pages: g.min_page_reads(layer as u32, prev_in_memory && g.keep_prev_layer),
            resident_pages_read: stats.resident_pages_read.load(Relaxed) - start.2,
            reader_cpu_seconds: (stats.reader_cpu_ns.load(Relaxed) - cpu0) as f64 / 1e9,
            hasher_busy_seconds: (busy_ns() - busy0) as f64 / 1e9,
            hashers: plan.groups.iter().map(|g| g.hashers.len()).sum(),
            labels: g.nodes * cfg.sectors.len() as u64,
        });
        digests.push(layer_digest(g, stripe, be_r, layer as u32)?);
        let st = state::State { batch_key: key.clone(), layers, layers_done: layer, layer_digests: digests.clone() };
        state::store(&spath, &st).map_err(|e| io_err(&format!("writing {}", spath.display()), e))?;
        sink.publish(prog);
    }
    let seconds = t0.elapsed().as_secs_f64();
    if last == layers {
        prog.finish();
    }
    sink.publish(prog);
    sink.close();
    Ok((seconds, per_layer))
}

/// Layers a previous run completed for this batch and that are still intact on storage (0
/// when none, another batch, or the slot was scrubbed or reused since).
pub fn layers_done(cfg: &BatchConfig) -> usize {
    verified_layers(cfg, false).len()
}

/// Layers the state file says a previous run of this batch completed, whether or not they
/// are still intact (what `verify-pc1` checks in depth).
pub fn layers_claimed(cfg: &BatchConfig) -> usize {
    own_state(cfg).map_or(0, |st| st.layers_done.min(st.layers))
}

/// The state file when it belongs to this batch (same inputs and placement, same layer count).
fn own_state(cfg: &BatchConfig) -> Option<state::State> {
    let st = state::load(&state_path(cfg))?;
    let (rids, _) = sector_ids(cfg);
    (st.batch_key == state::batch_key(cfg, &rids) && st.layers == cfg.num_layers()).then_some(st)
}

/// Pages sampled by [`layer_digest`]: nine spread over the layer, first and last included.
fn sample_pages(g: &Geometry) -> Vec<u64> {
    let mut p: Vec<u64> = (0..8).map(|i| i * g.ppl / 8).chain([g.ppl - 1]).collect();
    p.dedup();
    p
}

/// Digest of sampled pages of `layer` as stored: what a resume compares to know that the
/// layer on storage is still the one this batch wrote (a scrubbed slot reads as zeros or
/// garbage, another batch's layers differ in every page).
pub fn layer_digest(g: &Geometry, stripe: Stripe, be: &mut dyn PageBackend, layer: u32) -> Result<String, Pc1Error> {
    let pages = sample_pages(g);
    let buf = AlignedBuf::new(pages.len() * PAGE);
    let base = buf.as_mut_ptr();
    let ios: Vec<PageIo> = pages
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let (dev, offset) = stripe.locate(layer, p);
            // SAFETY: i < pages.len() and `buf` holds pages.len() pages, so the offset stays inside it.
            PageIo { dev, offset, buf: unsafe { base.add(i * PAGE) }, len: PAGE }
        })
        .collect();
    be.read(&ios).map_err(|e| io_err("reading layer pages for the resume digest", e))?;
    let mut data = layer.to_le_bytes().to_vec();
    data.extend_from_slice(buf.as_slice());
    Ok(hex::encode(sealer_hash::sha256(&data)))
}

/// The digests of the leading layers that a previous run of this batch completed and that
/// still match storage. `explain` prints why fewer layers than the state file lists are kept.
fn verified_layers(cfg: &BatchConfig, explain: bool) -> Vec<String> {
    let spath = state_path(cfg);
    let Some(st) = own_state(cfg) else {
        if explain && spath.exists() {
            log::warn!("state file {} belongs to another batch; starting from layer 1", spath.display());
        }
        return Vec::new();
    };
    let claimed = st.layers_done.min(st.layers);
    let want = &st.layer_digests[..claimed.min(st.layer_digests.len())];
    let (ok, why) = if want.is_empty() { (Vec::new(), None) } else { matching_prefix(cfg, want) };
    if explain && ok.len() < claimed {
        let why = why.unwrap_or_else(|| format!("the state file has no digest for layer {}", ok.len() + 1));
        log::warn!(
            "state file {} lists {claimed} finished layers but {why}; labelling from layer {}",
            spath.display(),
            ok.len() + 1
        );
    }
    ok
}

/// The leading digests of `want` (layer 1 first) that storage still matches, and why the
/// next one does not.
fn matching_prefix(cfg: &BatchConfig, want: &[String]) -> (Vec<String>, Option<String>) {
    let mut rd = match LayerReader::open(cfg) {
        Ok(rd) => rd,
        Err(e) => return (Vec::new(), Some(e.to_string())),
    };
    let mut ok = Vec::new();
    for (i, w) in want.iter().enumerate() {
        match layer_digest(&rd.g, rd.stripe, &mut rd.be, i as u32 + 1) {
            Ok(d) if &d == w => ok.push(d),
            Ok(_) => {
                return (
                    ok,
                    Some(format!(
                        "layer {} on storage is not the one this batch wrote (scrubbed or overwritten)",
                        i + 1
                    )),
                )
            }
            Err(e) => return (ok, Some(e.to_string())),
        }
    }
    (ok, None)
}

/// Reads interleaved pages of a finished (or partly finished) batch.
pub struct LayerReader {
    g: Geometry,
    stripe: Stripe,
    be: UringBackend,
}

impl LayerReader {
    /// Open the batch's storage for reading.
    pub fn open(cfg: &BatchConfig) -> Result<Self, Pc1Error> {
        let g = geometry(cfg, Tuning::default());
        let stripe = stripe(cfg, &g);
        let devs = Devices::open_existing(&cfg.layers.paths).map_err(|e| io_err("opening layer storage", e))?;
        let be = UringBackend::new(devs, 64).map_err(|e| io_err("creating io_uring", e))?;
        Ok(LayerReader { g, stripe, be })
    }

    /// Geometry of the batch.
    pub fn geometry(&self) -> &Geometry {
        &self.g
    }

    /// Read pages `[p0, p0 + count)` of `layer` into `buf` (count × 4096 bytes, aligned).
    pub fn read_pages(&mut self, layer: u32, p0: u64, count: usize, buf: &mut AlignedBuf) -> Result<(), Pc1Error> {
        assert!(buf.len() >= count * PAGE);
        let base = buf.as_mut_ptr();
        let ios: Vec<PageIo> = (0..count)
            .map(|i| {
                let (dev, offset) = self.stripe.locate(layer, p0 + i as u64);
                // SAFETY: i < count and buf.len() >= count * PAGE (asserted above): inside `buf`.
                PageIo { dev, offset, buf: unsafe { base.add(i * PAGE) }, len: PAGE }
            })
            .collect();
        self.be.read(&ios).map_err(|e| io_err("reading layer pages", e))
    }

    /// Read the row (node `v` of all sectors) of `layer`.
    pub fn read_row(&mut self, layer: u32, v: u64, page_buf: &mut AlignedBuf) -> Result<Vec<u8>, Pc1Error> {
        let p = v / self.g.npp;
        self.read_pages(layer, p, 1, page_buf)?;
        let off = (v % self.g.npp) as usize * self.g.row;
        Ok(page_buf.as_slice()[off..off + self.g.row].to_vec())
    }
}

/// Write every completed layer of every sector as rust-fil-proofs layer files:
/// `out/<sector_id>/sc-02-data-layer-<l>.dat` (N·32 bytes of labels, node order).
/// Returns the number of layers exported.
pub fn export_layers(cfg: &BatchConfig, out: &Path) -> Result<usize, Pc1Error> {
    use std::io::Write;
    let done = layers_done(cfg);
    if done == 0 {
        return Err(Pc1Error::Input(format!(
            "no completed layers for this batch (state file {}); run `sealer pc1` first",
            state_path(cfg).display()
        )));
    }
    let mut rd = LayerReader::open(cfg)?;
    let g = *rd.geometry();
    let n = cfg.sectors.len();
    let batch_pages = 256usize;
    let mut buf = AlignedBuf::new(batch_pages * PAGE);
    for layer in 1..=done {
        let mut files = Vec::new();
        for s in &cfg.sectors {
            let dir = out.join(s.sector_id.to_string());
            std::fs::create_dir_all(&dir).map_err(|e| io_err(&format!("creating {}", dir.display()), e))?;
            let path = dir.join(format!("sc-02-data-layer-{layer}.dat"));
            let tmp = dir.join(format!("sc-02-data-layer-{layer}.dat.tmp"));
            let f = std::fs::File::create(&tmp).map_err(|e| io_err(&format!("creating {}", tmp.display()), e))?;
            files.push((std::io::BufWriter::with_capacity(1 << 20, f), tmp, path));
        }
        let mut p = 0u64;
        let mut per_sector: Vec<Vec<u8>> = vec![Vec::with_capacity(batch_pages * g.npp as usize * 32); n];
        while p < g.ppl {
            let cnt = ((g.ppl - p) as usize).min(batch_pages);
            rd.read_pages(layer as u32, p, cnt, &mut buf)?;
            for b in per_sector.iter_mut() {
                b.clear();
            }
            let data = buf.as_slice();
            for i in 0..cnt as u64 * g.npp {
                let v = p * g.npp + i;
                if v >= g.nodes {
                    break;
                }
                let row = &data[i as usize * g.row..(i as usize + 1) * g.row];
                for (s, b) in per_sector.iter_mut().enumerate() {
                    b.extend_from_slice(&row[s * 32..s * 32 + 32]);
                }
            }
            for (s, b) in per_sector.iter().enumerate() {
                files[s].0.write_all(b).map_err(|e| io_err("writing layer file", e))?;
            }
            p += cnt as u64;
        }
        for (w, tmp, path) in files {
            let f = w.into_inner().map_err(|e| io_err("flushing layer file", e.error()))?;
            f.sync_all().map_err(|e| io_err("syncing layer file", e))?;
            std::fs::rename(&tmp, &path).map_err(|e| io_err(&format!("renaming {}", tmp.display()), e))?;
        }
    }
    Ok(done)
}

/// Result of [`verify_nodes`].
#[derive(Clone, Debug)]
pub struct VerifyReport {
    /// (layer, node) pairs checked (each for every sector).
    pub checked: usize,
    /// Mismatches as (layer, node, sector index).
    pub mismatches: Vec<(u32, u64, usize)>,
}

/// Recompute `count` random labels (every sector of each picked node) from their parents as
/// stored, and compare with the stored labels. Only layers the state file lists as completed are sampled.
pub fn verify_nodes(cfg: &BatchConfig, count: usize, seed: u64) -> Result<VerifyReport, Pc1Error> {
    let done = layers_claimed(cfg);
    if done == 0 {
        return Err(Pc1Error::Input("no completed layers to verify; run `sealer pc1` first".into()));
    }
    let (rids, _) = sector_ids(cfg);
    let parents = open_parents(cfg)?;
    let mut rd = LayerReader::open(cfg)?;
    let g = *rd.geometry();
    let mut page = AlignedBuf::new(PAGE);
    let mut x = seed | 1;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut mism = Vec::new();
    for _ in 0..count {
        let layer = (rnd() % done as u64) as u32 + 1;
        let v = rnd() % g.nodes;
        let stored = rd.read_row(layer, v, &mut page)?;
        let ps = parents.get(v);
        let np = if layer == 1 { 6 } else { 14 };
        let mut prow = Vec::with_capacity(np);
        if v > 0 {
            for (k, &p) in ps.iter().enumerate().take(np) {
                let l = if k < 6 { layer } else { layer - 1 };
                prow.push(rd.read_row(l, p as u64, &mut page)?);
            }
        }
        for s in 0..cfg.sectors.len() {
            let mut pbuf = vec![0u8; np * 32];
            for (k, r) in prow.iter().enumerate() {
                pbuf[k * 32..k * 32 + 32].copy_from_slice(&r[s * 32..s * 32 + 32]);
            }
            let want = sealer_hash::reference_label(&rids[s], layer, v, &pbuf);
            if want[..] != stored[s * 32..s * 32 + 32] {
                mism.push((layer, v, s));
            }
        }
    }
    Ok(VerifyReport { checked: count, mismatches: mism })
}
