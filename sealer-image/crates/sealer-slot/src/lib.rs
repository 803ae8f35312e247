//! The batch's layer slot as the sealer stores it, and what every phase after PC1 reads back:
//! the interleaved page geometry, the resume state file (which layers of which batch are
//! complete, with digests of their pages as stored), a reader of finished layers, the export
//! to rust-fil-proofs layer files, and each sector's replica_id and comm_d.
//!
//! PC1 writes the slot; PC2, C1 and the synthetic proofs only read it, through this crate.

#![warn(missing_docs)]

pub mod geometry;
pub mod state;

pub use geometry::{Geometry, Tuning};
use sealer_config::{ApiVersion, BatchConfig};
use sealer_error::SealerError;
use sealer_graph::{GraphApi, Parents};
use sealer_storage::{durable, AlignedBuf, Devices, Extent, PageBackend, PageIo, Stripe, UringBackend, PAGE};
use std::path::{Path, PathBuf};

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
pub fn open_parents(cfg: &BatchConfig) -> Result<Parents, SealerError> {
    match &cfg.parent_cache_dir {
        Some(dir) => sealer_graph::store::open_verified(dir, &cfg.proof_name(), cfg.nodes())
            .map_err(|e| SealerError::ParentCache(e.to_string())),
        None => Parents::open(cfg.nodes(), cfg.porep_id, graph_api(cfg.api_version))
            .map_err(|e| SealerError::Io(e.to_string())),
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
pub fn layer_digest(g: &Geometry, stripe: Stripe, be: &mut dyn PageBackend, layer: u32) -> Result<String, SealerError> {
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
    be.read(&ios).map_err(|e| SealerError::io("reading layer pages for the resume digest", e))?;
    let mut data = layer.to_le_bytes().to_vec();
    data.extend_from_slice(buf.as_slice());
    Ok(hex::encode(sealer_hash::sha256(&data)))
}

/// The digests of the leading layers that a previous run of this batch completed and that
/// still match storage. `explain` prints why fewer layers than the state file lists are kept.
pub fn verified_layers(cfg: &BatchConfig, explain: bool) -> Vec<String> {
    let spath = state_path(cfg);
    let Some(st) = own_state(cfg) else {
        if explain && spath.exists() {
            log::warn!("state file {} belongs to another batch; starting from layer 1", spath.display());
        }
        return Vec::new();
    };
    let claimed = st.layers_done.min(st.layers);
    let want = &st.layer_digests[..claimed.min(st.layer_digests.len())];
    let (ok, stop) = if want.is_empty() { (Vec::new(), None) } else { matching_prefix(cfg, want) };
    if explain && ok.len() < claimed {
        let why = match stop {
            Some(s) => s.to_string(),
            None => format!("the state file has no digest for layer {}", ok.len() + 1),
        };
        log::warn!(
            "state file {} lists {claimed} finished layers but {why}; labelling from layer {}",
            spath.display(),
            ok.len() + 1
        );
    }
    ok
}

/// The layers PC1 finished for this batch that storage still holds, for a step that reads
/// them all (PC2, the layer export): like [`layers_done`], but storage that cannot be opened
/// or read is an error of its own (exit 3, the storage's), not "PC1 has not run".
pub fn layers_intact(cfg: &BatchConfig) -> Result<usize, SealerError> {
    let Some(st) = own_state(cfg) else { return Ok(0) };
    let claimed = st.layers_done.min(st.layers);
    let want = &st.layer_digests[..claimed.min(st.layer_digests.len())];
    if want.is_empty() {
        return Ok(0);
    }
    match matching_prefix(cfg, want) {
        (_, Some(PrefixStop::Storage(e))) => Err(e),
        (ok, _) => Ok(ok.len()),
    }
}

/// Why [`matching_prefix`] stopped before the end.
enum PrefixStop {
    /// The layer (1-based) on storage is not the one this batch wrote.
    Differs(usize),
    /// Storage could not be opened or read.
    Storage(SealerError),
}

impl std::fmt::Display for PrefixStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrefixStop::Differs(l) => {
                write!(f, "layer {l} on storage is not the one this batch wrote (scrubbed or overwritten)")
            }
            PrefixStop::Storage(e) => write!(f, "{e}"),
        }
    }
}

/// The leading digests of `want` (layer 1 first) that storage still matches, and why the
/// next one does not.
fn matching_prefix(cfg: &BatchConfig, want: &[String]) -> (Vec<String>, Option<PrefixStop>) {
    let mut rd = match LayerReader::open(cfg) {
        Ok(rd) => rd,
        Err(e) => return (Vec::new(), Some(PrefixStop::Storage(e))),
    };
    let mut ok = Vec::new();
    for (i, w) in want.iter().enumerate() {
        match layer_digest(&rd.g, rd.stripe, &mut rd.rings[0], i as u32 + 1) {
            Ok(d) if &d == w => ok.push(d),
            Ok(_) => return (ok, Some(PrefixStop::Differs(i + 1))),
            Err(e) => return (ok, Some(PrefixStop::Storage(e))),
        }
    }
    (ok, None)
}

/// Reads interleaved pages of a finished (or partly finished) batch.
///
/// Pages that lie next to each other on a device are read by one request of up to
/// [`LayerReader::request_bytes`] (vectored when the stripe spreads them over memory), and each
/// device has its own ring, driven by its own thread when a read spans several devices.
pub struct LayerReader {
    g: Geometry,
    stripe: Stripe,
    /// One ring per layer device; ring `d` runs device `d`'s requests.
    rings: Vec<UringBackend>,
    request_bytes: usize,
}

/// Requests in flight on each device's ring. With 1 MiB requests, 16 keep a device busy where
/// fio's sequential read peaks (depth 8-16).
pub const READ_DEPTH: u32 = 16;

impl LayerReader {
    /// Open the batch's storage for reading.
    pub fn open(cfg: &BatchConfig) -> Result<Self, SealerError> {
        let g = geometry(cfg, Tuning::default());
        let stripe = stripe(cfg, &g);
        let devs = Devices::open_existing(&cfg.layers.paths, stripe.bytes_per_device(cfg.num_layers()))
            .map_err(|e| SealerError::io("opening layer storage", e))?;
        let rings = (0..devs.len())
            .map(|_| UringBackend::new(devs.clone(), READ_DEPTH))
            .collect::<Result<_, _>>()
            .map_err(|e| SealerError::io("creating io_uring", e))?;
        Ok(LayerReader { g, stripe, rings, request_bytes: sealer_storage::DEFAULT_REQUEST_BYTES })
    }

    /// Geometry of the batch.
    pub fn geometry(&self) -> &Geometry {
        &self.g
    }

    /// The largest request, bytes.
    pub fn request_bytes(&self) -> usize {
        self.request_bytes
    }

    /// Cap requests at `bytes` (at least [`sealer_storage::MIN_REQUEST_BYTES`], whole pages):
    /// what `sealer bench pc2-io --request-kib` sweeps.
    pub fn set_request_bytes(&mut self, bytes: usize) -> Result<(), SealerError> {
        if bytes < sealer_storage::MIN_REQUEST_BYTES || !bytes.is_multiple_of(PAGE) {
            return Err(SealerError::Input(format!(
                "a read request of {bytes} bytes: give a multiple of 4 KiB of at least {} KiB",
                sealer_storage::MIN_REQUEST_BYTES >> 10
            )));
        }
        self.request_bytes = bytes;
        Ok(())
    }

    /// Register long-lived buffers (PC2's range buffers) with every ring, for reads without a
    /// per-request page pinning; Err with the kernel's reason when a ring refused them (reads
    /// then go through plain buffers).
    ///
    /// # Safety
    /// Every buffer must stay allocated and unmoved until this reader is dropped.
    pub unsafe fn register_buffers(&mut self, bufs: &[&AlignedBuf]) -> Result<(), String> {
        let regions: Vec<(*mut u8, usize)> = bufs.iter().map(|b| (b.as_mut_ptr(), b.len())).collect();
        let bytes: usize = regions.iter().map(|r| r.1).sum();
        // Every ring is offered them, whether or not an earlier one took them.
        let mut refused = None;
        for r in &mut self.rings {
            // SAFETY: forwarded: the caller keeps the buffers alive and in place as long as self.
            if !unsafe { r.register_buffers(&regions) } && refused.is_none() {
                refused = r.register_error().map(|e| match e.kind() {
                    std::io::ErrorKind::OutOfMemory => {
                        format!(
                            "{e}: RLIMIT_MEMLOCK is below the {} MiB of buffers; raise the pod's memlock limit",
                            bytes >> 20
                        )
                    }
                    _ => format!("{e} ({} buffers, {} MiB)", regions.len(), bytes >> 20),
                });
            }
        }
        refused.map_or(Ok(()), Err)
    }

    /// Run `ext` (already planned), each device's requests on its ring, the devices at once.
    fn run(&mut self, ext: Vec<Extent>) -> Result<(), SealerError> {
        let err = |e| SealerError::io("reading layer pages", e);
        let mut by_dev: Vec<Vec<Extent>> = vec![Vec::new(); self.rings.len()];
        for e in ext {
            by_dev[e.dev].push(e);
        }
        let busy: Vec<(&mut UringBackend, Vec<Extent>)> =
            self.rings.iter_mut().zip(by_dev).filter(|(_, e)| !e.is_empty()).collect();
        if busy.len() <= 1 {
            return busy.into_iter().try_for_each(|(r, e)| r.read_extents(&e)).map_err(err);
        }
        std::thread::scope(|sc| {
            let reads: Vec<_> = busy.into_iter().map(|(r, e)| sc.spawn(move || r.read_extents(&e))).collect();
            reads.into_iter().try_for_each(|h| h.join().expect("layer reader thread panicked"))
        })
        .map_err(err)
    }

    /// Read pages `[p0, p0 + count)` of `layer` into `buf` (count × 4096 bytes, aligned).
    pub fn read_pages(&mut self, layer: u32, p0: u64, count: usize, buf: &mut AlignedBuf) -> Result<(), SealerError> {
        self.read_layers(&mut [(layer, buf)], p0, count)
    }

    /// Read pages `[p0, p0 + count)` of each `(layer, buffer)` into its buffer, every layer's
    /// requests in flight together: how PC2 and the layer export read a range.
    pub fn read_layers(
        &mut self,
        bufs: &mut [(u32, &mut AlignedBuf)],
        p0: u64,
        count: usize,
    ) -> Result<(), SealerError> {
        let mut ext = Vec::new();
        for (layer, buf) in bufs.iter_mut() {
            assert!(buf.len() >= count * PAGE);
            ext.extend(sealer_storage::plan_range(
                &self.stripe,
                *layer,
                p0,
                count,
                buf.as_mut_ptr(),
                self.request_bytes,
            ));
        }
        self.run(ext)
    }

    /// Read the pages `pages` of `layer` (any order, any gaps) into `buf`, page `pages[i]` at
    /// `i × 4096`: one submission for scattered reads (the synthetic proofs' columns).
    pub fn read_page_list(&mut self, layer: u32, pages: &[u64], buf: &mut AlignedBuf) -> Result<(), SealerError> {
        assert!(buf.len() >= pages.len() * PAGE);
        let base = buf.as_mut_ptr();
        // wrapping_add: addresses only; i < pages.len() pages, which `buf` holds (asserted above).
        let list = pages.iter().enumerate().map(|(i, &p)| (p, base.wrapping_add(i * PAGE)));
        let ext = sealer_storage::plan(&self.stripe, layer, list, self.request_bytes);
        self.run(ext)
    }

    /// Read the row (node `v` of all sectors) of `layer`.
    pub fn read_row(&mut self, layer: u32, v: u64, page_buf: &mut AlignedBuf) -> Result<Vec<u8>, SealerError> {
        let p = v / self.g.npp;
        self.read_pages(layer, p, 1, page_buf)?;
        let off = (v % self.g.npp) as usize * self.g.row;
        Ok(page_buf.as_slice()[off..off + self.g.row].to_vec())
    }
}

/// Write every completed layer of every sector as rust-fil-proofs layer files:
/// `out/<sector_id>/sc-02-data-layer-<l>.dat` (N·32 bytes of labels, node order).
/// Returns the number of layers exported.
pub fn export_layers(cfg: &BatchConfig, out: &Path) -> Result<usize, SealerError> {
    use std::io::Write;
    let done = layers_intact(cfg)?;
    if done == 0 {
        return Err(SealerError::Input(format!(
            "no completed layers for this batch (state file {}); run `sealer pc1` first",
            state_path(cfg).display()
        )));
    }
    let mut rd = LayerReader::open(cfg)?;
    let g = *rd.geometry();
    let n = cfg.sectors.len();
    // 16 MiB per read: large requests, all of them in flight.
    let batch_pages = 4096usize;
    let mut buf = AlignedBuf::new(batch_pages * PAGE);
    for layer in 1..=done {
        let mut files = Vec::new();
        for s in &cfg.sectors {
            let dir = out.join(s.sector_id.to_string());
            std::fs::create_dir_all(&dir).map_err(|e| SealerError::io(&format!("creating {}", dir.display()), e))?;
            let path = dir.join(format!("sc-02-data-layer-{layer}.dat"));
            let tmp = dir.join(format!("sc-02-data-layer-{layer}.dat.tmp"));
            let f =
                std::fs::File::create(&tmp).map_err(|e| SealerError::io(&format!("creating {}", tmp.display()), e))?;
            durable::track(&tmp);
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
                files[s].0.write_all(b).map_err(|e| SealerError::io("writing layer file", e))?;
            }
            p += cnt as u64;
        }
        for (w, tmp, path) in files {
            let f = w.into_inner().map_err(|e| SealerError::io("flushing layer file", e.error()))?;
            durable::crash_point("export.written");
            f.sync_all().map_err(|e| SealerError::io("syncing layer file", e))?;
            durable::synced(&tmp);
            durable::rename_only(&tmp, &path)
                .map_err(|e| SealerError::io(&format!("renaming {}", tmp.display()), e))?;
        }
    }
    Ok(done)
}
