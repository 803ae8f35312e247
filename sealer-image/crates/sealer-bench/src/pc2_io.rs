//! `sealer bench pc2-io`: PC2's data path against fio on the same files. A slot laid out as PC1
//! lays it out is read as PC2 reads it (every layer of a range at once, in large requests, one
//! ring per layer file), once alone and once under PC2's hashing; the outputs are written as PC2
//! writes them; fio reads the same layer files and writes a file as large as the outputs.

use crate::{cpu_now, fio, slot};
use sealer_config::{ApiVersion, BatchConfig, Pc2Engine};
use sealer_slot::LayerReader;
use sealer_storage::{AlignedBuf, PAGE};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Sector size, bytes.
    pub sector_size: u64,
    /// Sectors in the batch.
    pub sectors: usize,
    /// Where the slot lies (layer files, offset).
    pub place: slot::SlotPlace,
    /// Work directory: the layer files and the outputs.
    pub dir: PathBuf,
    /// Request caps to read with, bytes (one row each).
    pub request_bytes: Vec<usize>,
    /// Run PC2 itself on the slot (its hashing beside the reads) on this engine.
    pub hashing: Option<Pc2Engine>,
    /// Times every row runs; each keeps its best.
    pub rounds: usize,
}

/// Each row of `new` replaces the row of the same name in `best` when it moved bytes faster.
fn keep_best(best: &mut Vec<Row>, new: Vec<Row>) {
    for r in new {
        match best.iter_mut().find(|b| b.what == r.what) {
            Some(b) if b.bytes_per_s >= r.bytes_per_s => {}
            Some(b) => *b = r,
            None => best.push(r),
        }
    }
}

/// One way of reading or writing, with its figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    /// What ran.
    pub what: String,
    /// Request size, bytes.
    pub request_bytes: usize,
    /// Requests in flight per ring (per fio job).
    pub depth: u32,
    /// Bytes moved.
    pub bytes: u64,
    /// Bytes per second.
    pub bytes_per_s: f64,
    /// CPU seconds per GB (1e9 bytes) moved.
    pub cpu_s_per_gb: f64,
    /// This row's bandwidth over fio's 1 MiB sequential one on the same files (None: no fio).
    pub vs_fio_1mib: Option<f64>,
    /// This row's CPU per GB over fio's 1 MiB one's.
    pub cpu_vs_fio_1mib: Option<f64>,
}

impl Row {
    fn new(what: String, request_bytes: usize, depth: u32, bytes: u64, seconds: f64, cpu: f64) -> Row {
        Row {
            what,
            request_bytes,
            depth,
            bytes,
            bytes_per_s: bytes as f64 / seconds,
            cpu_s_per_gb: cpu / (bytes as f64 / 1e9),
            ..Default::default()
        }
    }

    fn against(&mut self, fio: Option<&Row>) {
        if let Some(f) = fio {
            self.vs_fio_1mib = Some(self.bytes_per_s / f.bytes_per_s);
            self.cpu_vs_fio_1mib = Some(self.cpu_s_per_gb / f.cpu_s_per_gb);
        }
    }
}

/// PC2 itself on the slot: how long it waited for its layer reads.
#[derive(Clone, Debug, Serialize)]
pub struct Hashing {
    /// The engine.
    pub engine: String,
    /// PC2's wall seconds.
    pub seconds: f64,
    /// Seconds it waited for layer reads (the first range, and reads beyond hashing).
    pub read_wait_seconds: f64,
    /// read_wait_seconds as a share of seconds, per cent.
    pub read_wait_percent: f64,
    /// Slot bytes over PC2's seconds: what PC2 drew from the layer files.
    pub slot_bytes_per_s: f64,
}

/// The run's figures; serialised as `bench pc2-io`'s JSON document (units in the key names).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Sector size, bytes.
    pub sector_size_bytes: u64,
    /// Sectors in the batch.
    pub sectors: usize,
    /// SDR layers.
    pub layers: usize,
    /// Layer files the slot stripes over.
    pub layer_files: usize,
    /// The slot's start in each file, bytes.
    pub slot_offset_bytes: u64,
    /// Bytes of every layer of the batch.
    pub slot_bytes: u64,
    /// PC2's range (the CPU engine's), nodes.
    pub range_nodes: u64,
    /// fio's version, or why its rows are missing.
    pub fio: String,
    /// Rounds run (each row keeps its best).
    pub rounds: usize,
    /// Reads of the whole slot: the sealer at each request cap, fio at the sealer's request
    /// size and depth, and at 1 MiB.
    pub reads: Vec<Row>,
    /// The outputs written as PC2 writes them, and fio's sequential write of as many bytes
    /// into a new file.
    pub writes: Vec<Row>,
    /// PC2 itself on the slot (None: not asked).
    pub hashing: Option<Hashing>,
}

/// The fio rows' depth at 1 MiB: where fio's sequential read of one file peaks.
const FIO_DEPTH_1MIB: u32 = 16;

/// Run the bench: lay out the slot (untimed), read it, write the outputs, run fio, PC2.
pub fn run(o: &Options) -> Result<Report, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    std::fs::create_dir_all(&o.dir).map_err(|e| err(&e))?;
    let proof = slot::proof_id_of(o.sector_size)?;
    let out = o.dir.join("pc2-io-out");
    let _ = std::fs::remove_dir_all(&out);
    let cfg = slot::random_config_in(o.sector_size, proof, ApiVersion::V1_1_0, o.sectors, 51, &o.dir, &out, o.place);
    for r in &o.request_bytes {
        if *r < sealer_storage::MIN_REQUEST_BYTES || !r.is_multiple_of(PAGE) {
            return Err(format!(
                "--request-kib {}: give multiples of 4 KiB of at least {} KiB",
                r >> 10,
                sealer_storage::MIN_REQUEST_BYTES >> 10
            ));
        }
    }
    log::info!("pc2-io: random labels in the slot (untimed)…");
    slot::fill_random_layers(&cfg)?;
    let g = sealer_slot::geometry(&cfg, sealer_slot::Tuning::default());
    let stripe = sealer_slot::stripe(&cfg, &g);
    let layers = cfg.num_layers();
    let leaves = g.nodes / sealer_pc2::base_tree_count(o.sector_size) as u64;
    let range = sealer_pc2::cpu_range(leaves, g.npp);
    let slot_bytes = g.ppl * PAGE as u64 * layers as u64;
    let fio_version = fio::version();

    // fio on each layer file's part of the slot.
    let regions: Vec<fio::Region> = cfg
        .layers
        .paths
        .iter()
        .map(|p| fio::Region {
            path: p.clone(),
            offset: stripe.slot_offset * PAGE as u64,
            size: stripe.bytes_per_device(layers) - stripe.slot_offset * PAGE as u64,
        })
        .collect();
    let mut fio_reads: Vec<(usize, u32)> =
        o.request_bytes.iter().map(|&r| (r, sealer_slot::READ_DEPTH)).chain([(1 << 20, FIO_DEPTH_1MIB)]).collect();
    fio_reads.sort();
    fio_reads.dedup_by_key(|r| r.0);
    // Each round runs every row once, the sealer's and fio's in turn; a row keeps its best
    // round (a virtual machine's memory is slow the first time it is touched, whoever does).
    let mut reads: Vec<Row> = Vec::new();
    let mut writes: Vec<Row> = Vec::new();
    for round in 0..o.rounds.max(1) {
        log::info!("pc2-io: round {} of {}", round + 1, o.rounds.max(1));
        let mut rr = Vec::new();
        for &req in &o.request_bytes {
            let (bytes, secs, cpu) = read_as_pc2(&cfg, range, req)?;
            let what = format!("sealer: PC2's reads, {} KiB requests", req >> 10);
            rr.push(Row::new(what, req, sealer_slot::READ_DEPTH, bytes, secs, cpu));
        }
        if fio_version.is_ok() {
            for &(bs, depth) in &fio_reads {
                let m = fio::run(&fio::Run { write: false, block_bytes: bs, depth, regions: regions.clone() })?;
                let what = format!("fio: sequential read, {} KiB requests", bs >> 10);
                rr.push(Row::new(what, bs, depth, m.bytes, m.bytes as f64 / m.bytes_per_s, m.cpu_seconds));
            }
        }
        // Writes: PC2's outputs, then fio writing as many bytes into a new file beside them.
        let wdir = o.dir.join("pc2-io-writes");
        let _ = std::fs::remove_dir_all(&wdir);
        let (c0, t0) = (cpu_now(), Instant::now());
        let w = sealer_pc2::outputs::write_as_pc2(&wdir, o.sector_size, o.sectors, range).map_err(|e| err(&e))?;
        let what = format!("sealer: PC2's output writes ({} files, synced once each)", w.files);
        let mut wr =
            vec![Row::new(what, sealer_pc2::writer::CHUNK, 1, w.bytes, t0.elapsed().as_secs_f64(), cpu_now() - c0)];
        let _ = std::fs::remove_dir_all(&wdir);
        if fio_version.is_ok() {
            let path = o.dir.join("pc2-io-fio-write.dat");
            let _ = std::fs::remove_file(&path);
            let size = w.bytes.div_ceil(1 << 20) << 20;
            let m = fio::run(&fio::Run {
                write: true,
                block_bytes: 1 << 20,
                depth: FIO_DEPTH_1MIB,
                regions: vec![fio::Region { path: path.clone(), offset: 0, size }],
            });
            let _ = std::fs::remove_file(&path);
            let m = m?;
            let what = "fio: sequential write, 1 MiB requests".to_string();
            wr.push(Row::new(what, 1 << 20, FIO_DEPTH_1MIB, m.bytes, m.bytes as f64 / m.bytes_per_s, m.cpu_seconds));
        }
        keep_best(&mut reads, rr);
        keep_best(&mut writes, wr);
    }
    let fio_read = reads.iter().find(|r| r.what.starts_with("fio") && r.request_bytes == 1 << 20).cloned();
    for r in reads.iter_mut() {
        r.against(fio_read.as_ref());
    }
    let fio_write = writes.iter().find(|r| r.what.starts_with("fio")).cloned();
    for r in writes.iter_mut() {
        r.against(fio_write.as_ref());
    }

    let hashing = match o.hashing {
        None => None,
        Some(engine) => Some(pc2_on_slot(&cfg, engine, slot_bytes)?),
    };
    let _ = std::fs::remove_dir_all(&out);
    Ok(Report {
        sector_size_bytes: o.sector_size,
        sectors: o.sectors,
        layers,
        layer_files: cfg.layers.paths.len(),
        slot_offset_bytes: stripe.slot_offset * PAGE as u64,
        slot_bytes,
        range_nodes: range,
        fio: fio_version.unwrap_or_else(|e| format!("not run: {e}")),
        rounds: o.rounds.max(1),
        reads,
        writes,
        hashing,
    })
}

/// Every range of every layer read as PC2 reads it (all layers of a range at once), requests
/// capped at `request_bytes`: (bytes, seconds, CPU seconds).
fn read_as_pc2(cfg: &BatchConfig, range: u64, request_bytes: usize) -> Result<(u64, f64, f64), String> {
    let g = sealer_slot::geometry(cfg, sealer_slot::Tuning::default());
    let layers = cfg.num_layers();
    let pages_per_range = range.div_ceil(g.npp) as usize;
    let mut bufs: Vec<AlignedBuf> = (0..layers).map(|_| AlignedBuf::new(pages_per_range * PAGE)).collect();
    // Declared after the buffers, so dropped before them, as in PC2.
    let mut rd = LayerReader::open(cfg).map_err(|e| e.to_string())?;
    rd.set_request_bytes(request_bytes).map_err(|e| e.to_string())?;
    let all: Vec<&AlignedBuf> = bufs.iter().collect();
    // SAFETY: `bufs` is declared before `rd` (dropped after it) and its buffers never move.
    let registered = unsafe { rd.register_buffers(&all) }.is_ok();
    log::info!("pc2-io: reading with {} KiB requests, buffers registered: {registered}", request_bytes >> 10);
    let (c0, t0) = (cpu_now(), Instant::now());
    let mut bytes = 0u64;
    let mut p0 = 0u64;
    while p0 < g.ppl {
        let count = (g.ppl - p0).min(pages_per_range as u64) as usize;
        let mut ls: Vec<(u32, &mut AlignedBuf)> = bufs.iter_mut().enumerate().map(|(l, b)| (l as u32 + 1, b)).collect();
        rd.read_layers(&mut ls, p0, count).map_err(|e| e.to_string())?;
        bytes += (count * PAGE * layers) as u64;
        p0 += count as u64;
    }
    Ok((bytes, t0.elapsed().as_secs_f64(), cpu_now() - c0))
}

/// PC2 itself on the slot (CPU or GPU engine): its read waits.
fn pc2_on_slot(cfg: &BatchConfig, engine: Pc2Engine, slot_bytes: u64) -> Result<Hashing, String> {
    let mut c = cfg.clone();
    c.pc2_engine = engine;
    log::info!("pc2-io: PC2 on the {engine:?} engine…");
    let o = sealer_pc2::run_pc2_measured(&c, false, None, None).map_err(|e| e.to_string())?;
    let b = o.breakdown;
    Ok(Hashing {
        engine: format!("{engine:?}").to_lowercase(),
        seconds: b.total,
        read_wait_seconds: b.read_wait,
        read_wait_percent: 100.0 * b.read_wait / b.total,
        slot_bytes_per_s: slot_bytes as f64 / b.total,
    })
}

/// The report as a markdown table.
pub fn render(r: &Report) -> String {
    let gb = |b: f64| b / 1e9;
    let ratio = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{x:.2}×"));
    let mut t = format!(
        "PC2's data path: {} sectors of {} B, {} layers over {} layer file(s) at offset {} B: {:.2} GB of slot, ranges of {} nodes; fio {}; best of {} round(s)\n\n\
         | what | request | depth | GB | GB/s | CPU s per GB | vs fio 1 MiB | CPU vs fio 1 MiB |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
        r.sectors, r.sector_size_bytes, r.layers, r.layer_files, r.slot_offset_bytes, gb(r.slot_bytes as f64), r.range_nodes, r.fio, r.rounds
    );
    for row in r.reads.iter().chain(&r.writes) {
        t += &format!(
            "| {} | {} KiB | {} | {:.2} | {:.2} | {:.3} | {} | {} |\n",
            row.what,
            row.request_bytes >> 10,
            row.depth,
            gb(row.bytes as f64),
            gb(row.bytes_per_s),
            row.cpu_s_per_gb,
            ratio(row.vs_fio_1mib),
            ratio(row.cpu_vs_fio_1mib)
        );
    }
    if let Some(h) = &r.hashing {
        t += &format!(
            "\nPC2 on the {} engine: {:.2} s, of which {:.3} s waiting for layer reads ({:.1} %); {:.3} GB/s of slot drawn\n",
            h.engine, h.seconds, h.read_wait_seconds, h.read_wait_percent, gb(h.slot_bytes_per_s)
        );
    }
    t
}

/// Write the report's JSON document to `path`.
pub fn write_json(r: &Report, path: &Path) -> Result<(), String> {
    std::fs::write(path, serde_json::to_string_pretty(r).expect("a report serialises"))
        .map_err(|e| format!("{}: {e}", path.display()))
}
