//! Batch PC1 for the sealfleet sealer: stacked-DRG labels of N sectors at once, bit-identical
//! to rust-fil-proofs, on interleaved page storage.
//!
//! Storage layout: a 4 KiB page holds `4096 / (N·32)` consecutive nodes; each row is node `v`
//! of every sector (sector `s` at byte `s·32` of the row). Pages are striped over the layer
//! paths ([`sealer_storage::Stripe`]).
//!
//! Entry points: [`run_pc1`] (label every layer, resumable at layer granularity) and
//! [`verify_nodes`] (recompute random labels from stored parents). What later phases read of
//! the slot (the reader, the resume state, the export to layer files) is `sealer-slot`.

#![warn(missing_docs)]

pub mod engine;
pub mod sync;

use engine::{Buffers, ThreadPlan};
use sealer_config::BatchConfig;
use sealer_error::SealerError;
use sealer_graph::Parents;
use sealer_hash::{Kernel, LabelHasher};
use sealer_progress::{BufferBacking, LiveStats, Progress, ProgressSink};
use sealer_slot::{
    geometry, layer_digest, layers_claimed, open_parents, sector_ids, state, state_path, stripe, verified_layers,
    Geometry, LayerReader, Tuning,
};
use sealer_storage::{AlignedBuf, Devices, HugeArena, PageBackend, Stripe, UringBackend, HUGEPAGE, PAGE};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

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

/// Run PC1 for the batch: every layer of every sector, resuming after the last layer a
/// previous run completed for the same batch.
pub fn run_pc1(cfg: &BatchConfig, opts: &Pc1Options) -> Result<Pc1Report, SealerError> {
    run_pc1_with(cfg, opts, None)
}

/// [`run_pc1`] publishing to an existing progress sink (so `batch` keeps one endpoint for
/// both phases).
pub fn run_pc1_with(
    cfg: &BatchConfig,
    opts: &Pc1Options,
    sink: Option<&ProgressSink>,
) -> Result<Pc1Report, SealerError> {
    // --- checks before any work ---
    let kernel = if opts.force_portable_hash {
        Kernel::Portable
    } else {
        Kernel::select(opts.allow_portable_hash).map_err(|e| SealerError::Unsupported(e.to_string()))?
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
        .map_err(|e| SealerError::io(&format!("creating {}", cfg.output_dir.display()), e))?;
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
        .map_err(|e| SealerError::io("opening layer storage", e))?;
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
    let mut be_r =
        UringBackend::new(devs.clone(), opts.queue_depth).map_err(|e| SealerError::io("creating io_uring", e))?;
    let mut be_w =
        UringBackend::new(devs.clone(), opts.queue_depth).map_err(|e| SealerError::io("creating io_uring", e))?;
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
) -> Result<(f64, Vec<LayerStats>), SealerError> {
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
        sealer_storage::durable::crash_point("pc1.layer-written");
        be_w.flush().map_err(|e| SealerError::io("flushing layer storage", e))?;
        sealer_storage::durable::crash_point("pc1.layer-flushed");
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
        state::store(&spath, &st).map_err(|e| SealerError::io(&format!("writing {}", spath.display()), e))?;
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
pub fn verify_nodes(cfg: &BatchConfig, count: usize, seed: u64) -> Result<VerifyReport, SealerError> {
    let done = layers_claimed(cfg);
    if done == 0 {
        return Err(SealerError::Input("no completed layers to verify; run `sealer pc1` first".into()));
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
