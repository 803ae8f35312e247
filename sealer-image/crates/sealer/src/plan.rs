//! `sealer plan`: check a batch config against the machine it would run on, without sealing,
//! and estimate what the batch needs (storage, memory, hugepages, output space, IOPS).
//!
//! Every check is read-only: layer devices and files are inspected, never created or resized;
//! the parent cache is checked against its manifest by size (its digest is checked when the
//! batch runs); data files are checked by size only.
//!
//! A SyntheticPoRep batch also makes its synthetic proofs after PC2, one sector after another
//! ([`sealer_proofs::synth::cost`]): their memory is checked against what this process may use,
//! their files are counted in the outputs.

use sealer_config::BatchConfig;
use sealer_pc1::engine::Buffers;
use sealer_slot::{Geometry, Tuning};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One check of the plan.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What was checked.
    pub what: String,
    /// Whether the machine is ready for it.
    pub ok: bool,
    /// What was found, and the fix when not ok.
    pub detail: String,
}

/// What the batch needs, from its geometry and layout.
#[derive(Clone, Debug, Serialize)]
pub struct Resources {
    /// Sectors in the batch.
    pub sectors: usize,
    /// Sector size in bytes.
    pub sector_size: u64,
    /// SDR layers.
    pub layers: usize,
    /// Labels PC1 computes (sectors × nodes × layers).
    pub labels: u64,
    /// Bytes of the layer slot over all devices.
    pub slot_bytes: u64,
    /// Bytes each layer device needs (slot offset included).
    pub bytes_per_device: u64,
    /// Bytes of the sealer's buffers (node cache, read-ahead, hasher buffers).
    pub buffer_bytes: u64,
    /// 1 GiB hugepages those buffers fill.
    pub hugepages_1gi_needed: u64,
    /// Bytes of the node's parent cache for this graph.
    pub parent_cache_bytes: u64,
    /// Output bytes per sector (replica, trees, layer files unless dropped, p_aux/t_aux; a
    /// SyntheticPoRep sector's proofs file too, counted beside its layer files: a bound on the
    /// peak, as the layer files go once the proofs are written).
    pub output_bytes_per_sector: u64,
    /// Output bytes of the batch.
    pub output_bytes: u64,
    /// Hasher threads of the layout.
    pub hashers: usize,
    /// Labels per second per hasher assumed for the rates below.
    pub labels_per_second_per_hasher: f64,
    /// PC1 wall time at that rate, seconds.
    pub pc1_seconds: f64,
    /// Whether the previous layer fits the node cache (expander parents then come from memory).
    pub previous_layer_in_memory: bool,
    /// Share of the previous layer held resident (0-1; 1 when kept whole).
    pub previous_layer_resident: f64,
    /// 4 KiB page reads per second PC1 needs for expander parents at that rate (8 per node
    /// step for the part of the previous layer not in memory; far base parents not counted).
    pub read_iops: f64,
    /// 4 KiB page writes per second PC1 needs at that rate.
    pub write_iops: f64,
    /// The synthetic proofs after PC2 of a SyntheticPoRep batch (None for other proofs).
    pub synthetic_proofs: Option<SynthPlan>,
}

/// SyntheticPoRep's synthetic proofs after PC2, from [`sealer_proofs::synth::cost`]: the
/// sectors are proven one after another, each on every CPU of the layout.
#[derive(Clone, Debug, Serialize)]
pub struct SynthPlan {
    /// Synthetic challenges per sector: min(nodes, 2^18).
    pub challenges: u64,
    /// Peak memory of the proofs, bytes: one sector's (it does not grow with the batch).
    pub peak_memory_bytes: u64,
    /// Bytes of each sector's proofs file (counted in the outputs).
    pub file_bytes_per_sector: u64,
    /// Distinct CPUs of the layout, at least 1: what the proofs are assumed to run on.
    pub cpus: usize,
    /// Wall seconds of the batch's proofs: CPU-seconds per sector × sectors / CPUs.
    pub seconds: f64,
}

/// The plan: checks and resources.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// Checks against this machine, in order.
    pub checks: Vec<Check>,
    /// The batch's needs.
    pub resources: Resources,
    /// PC2 on the GPU engine, for `pc2_engine: gpu` with a device here (None otherwise).
    pub pc2_gpu: Option<GpuPlan>,
    /// PC2's time and what bounds it.
    pub pc2: Pc2Plan,
}

/// The layer devices' measured sequential bandwidths, summed over the devices the slot stripes
/// across (from a `sealer qualify` document).
#[derive(Clone, Debug, Default, Serialize)]
pub struct StorageFigures {
    /// Bytes per second of 1 MiB reads (0: not measured on every device).
    pub read_bytes_per_second: f64,
    /// Bytes per second of 1 MiB writes (0: not measured on every device).
    pub write_bytes_per_second: f64,
    /// Where the figures come from, and what is missing.
    pub basis: String,
}

impl StorageFigures {
    /// The figures of `cfg`'s layer devices in a `sealer qualify` document; an error when it
    /// measured none of them.
    pub fn from_qualification(cfg: &BatchConfig, doc: &serde_json::Value, source: &str) -> Result<Self, String> {
        let devices = doc["devices"]
            .as_array()
            .ok_or_else(|| format!("{source}: no devices (not a `sealer qualify` document)"))?;
        let mut f = StorageFigures::default();
        let (mut reads, mut writes, mut missing) = (Some(0.0), Some(0.0), Vec::new());
        for p in &cfg.layers.paths {
            let Some(d) = devices.iter().find(|d| d["path"].as_str() == Some(&p.display().to_string())) else {
                missing.push(p.display().to_string());
                continue;
            };
            reads = reads.zip(d["seq_read_bytes_per_s"].as_f64()).map(|(a, b)| a + b);
            writes = writes.zip(d["seq_write_bytes_per_s"].as_f64()).map(|(a, b)| a + b);
        }
        if missing.len() == cfg.layers.paths.len() {
            return Err(format!(
                "{source} measured none of the batch's layer devices ({}); run `sealer qualify` on them",
                missing.join(", ")
            ));
        }
        let (reads, writes) = if missing.is_empty() { (reads, writes) } else { (None, None) };
        f.read_bytes_per_second = reads.unwrap_or(0.0);
        f.write_bytes_per_second = writes.unwrap_or(0.0);
        f.basis = format!("{source}, summed over {} layer device(s)", cfg.layers.paths.len());
        if !missing.is_empty() {
            f.basis += &format!("; not measured there: {} (storage bounds left out)", missing.join(", "));
        } else if reads.is_none() || writes.is_none() {
            f.basis += "; a device without a read or write figure (that bound left out)";
        }
        Ok(f)
    }
}

/// PC2 of the batch: the four bounds ([`sealer_pc2::bounds`]) and the seconds per sector.
#[derive(Clone, Debug, Serialize)]
pub struct Pc2Plan {
    /// The engine: cpu or gpu.
    pub engine: String,
    /// CPUs (the layout's) or GPUs (the devices here, else 1) it runs on.
    pub units: usize,
    /// The bounds, for the whole batch.
    #[serde(flatten)]
    pub bounds: sealer_pc2::bounds::Pc2Bounds,
    /// PC2's seconds per sector: the largest bound over the sectors.
    pub seconds_per_sector: f64,
    /// What the storage figures rest on.
    pub storage_basis: String,
}

/// PC2 on the GPU engine: the devices it would use here and what a range takes on them
/// (the same numbers PC2 runs with).
#[derive(Clone, Debug, Serialize)]
pub struct GpuPlan {
    /// The devices, by name.
    pub devices: Vec<String>,
    /// The range and its memory.
    #[serde(flatten)]
    pub budget: sealer_pc2::engine::GpuBudget,
}

/// The "PC2 devices" check of a `pc2_engine: gpu` batch, and its plan when there is a device.
fn gpu_check(cfg: &BatchConfig, tuning: Tuning, checks: &mut Vec<Check>) -> Option<GpuPlan> {
    const WHAT: &str = "PC2 devices";
    let devices = match sealer_pc2::engine::chosen_devices() {
        Ok(d) => d,
        Err(e) => {
            checks.push(check(
                WHAT,
                false,
                format!(
                    "{}: pc2_engine gpu exits 8 here; run the batch where a GPU is granted, or use pc2_engine cpu",
                    e.message()
                ),
            ));
            return None;
        }
    };
    let g = sealer_slot::geometry(cfg, tuning);
    let leaves = g.nodes / sealer_pc2::base_tree_count(cfg.sector_size) as u64;
    let b = sealer_pc2::engine::gpu_budget(&devices, leaves, g.npp, cfg.sectors.len(), cfg.num_layers());
    let names: Vec<String> = devices.iter().map(|d| format!("{} ({})", d.name, gib(d.memory_bytes))).collect();
    let short: Vec<&String> =
        devices.iter().zip(&names).filter(|(d, _)| d.memory_bytes < b.device_bytes).map(|(_, n)| n).collect();
    checks.push(if short.is_empty() {
        check(
            WHAT,
            true,
            format!(
                "{}: ranges of {} nodes, each split among {}, {} on each at once; {} of device memory each, {} of page-locked host memory",
                names.join(", "),
                b.range,
                b.parts,
                b.in_flight,
                gib(b.device_bytes * b.in_flight as u64),
                gib(b.host_bytes)
            ),
        )
    } else {
        check(
            WHAT,
            false,
            format!(
                "{}: a range part needs {} of device memory even at its smallest: a smaller batch, or a GPU with more memory",
                short.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                gib(b.device_bytes)
            ),
        )
    });
    Some(GpuPlan { devices: names, budget: b })
}

impl Plan {
    /// True when every check passed.
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

fn check(what: &str, ok: bool, detail: String) -> Check {
    Check { what: what.into(), ok, detail }
}

/// Bytes in the largest binary unit that keeps the number at least 1.
fn gib(b: u64) -> String {
    let units = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    match units.iter().find(|(_, shift)| b >= 1u64 << shift) {
        Some((u, shift)) => format!("{:.1} {u}", b as f64 / (1u64 << shift) as f64),
        None => format!("{b} B"),
    }
}

/// Free bytes of the file system holding `path` (or its nearest existing ancestor).
fn free_bytes(path: &Path) -> Option<(u64, std::path::PathBuf)> {
    let mut p = path.to_path_buf();
    while !p.exists() {
        p = p.parent()?.to_path_buf();
    }
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid out-pointer for the call.
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0).then(|| (st.f_bavail as u64 * st.f_frsize as u64, p))
}

/// Size of a layer path as the sealer would see it: a block device's size, a file's length, or
/// None when it does not exist (files are created at run time).
fn device_bytes(path: &Path) -> std::io::Result<Option<(u64, bool)>> {
    use std::os::unix::fs::FileTypeExt;
    let md = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if md.file_type().is_block_device() {
        let f = std::fs::File::open(path)?;
        let end = std::io::Seek::seek(&mut &f, std::io::SeekFrom::End(0))?;
        return Ok(Some((end, true)));
    }
    Ok(Some((md.len(), false)))
}

fn free_hugepages_1g() -> Option<u64> {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages").ok()?.trim().parse().ok()
}

/// Memory this process may use, bytes, and where that figure comes from: its cgroup's limit
/// (v2 `memory.max`, v1 `memory.limit_in_bytes`) when one is set, else `MemAvailable` of
/// /proc/meminfo.
pub fn available_memory() -> Option<(u64, String)> {
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let cgroup = read(Path::new("/proc/self/cgroup")).unwrap_or_default();
    cgroup_memory_limit(&cgroup, &read).or_else(|| {
        let meminfo = read(Path::new("/proc/meminfo"))?;
        let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some((kib << 10, "MemAvailable in /proc/meminfo".into()))
    })
}

/// The memory limit of the cgroup that `/proc/self/cgroup` (`cgroup`) names, read through
/// `read`: the v2 `memory.max` or the v1 memory controller's `memory.limit_in_bytes`, under the
/// process's cgroup path or at the mount's root (a container's own cgroup). None when no limit
/// is set (`max`, or v1's page-rounded i64::MAX).
fn cgroup_memory_limit(cgroup: &str, read: &dyn Fn(&Path) -> Option<String>) -> Option<(u64, String)> {
    for line in cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        let (root, file) = match controllers {
            "" => ("/sys/fs/cgroup", "memory.max"),
            c if c.split(',').any(|c| c == "memory") => ("/sys/fs/cgroup/memory", "memory.limit_in_bytes"),
            _ => continue,
        };
        let own = Path::new(root).join(path.trim_start_matches('/')).join(file);
        for p in [own, PathBuf::from(root).join(file)] {
            if let Some(text) = read(&p) {
                match text.trim().parse::<u64>() {
                    Ok(b) if b < 1 << 60 => return Some((b, format!("cgroup limit {}", p.display()))),
                    _ => break,
                }
            }
        }
    }
    None
}

/// Estimate what `cfg` needs at `rate` labels/s per hasher (`layer_files`: PC2 keeps the layer
/// files in each cache directory, as `sealer batch` does by default).
pub fn resources(cfg: &BatchConfig, tuning: Tuning, rate: f64, layer_files: bool) -> (Resources, Geometry) {
    let layout = cfg.effective_layout();
    let g = sealer_slot::geometry(cfg, tuning);
    let stripe = sealer_slot::stripe(cfg, &g);
    let n = cfg.sectors.len();
    let layers = cfg.num_layers();
    let buffer_bytes = Buffers::bytes(&g) as u64;
    let hashers: usize = layout.coordinators.iter().map(|c| c.hashers.len()).sum();
    let labels = n as u64 * cfg.nodes() * layers as u64;
    let labels_per_s = rate * hashers.max(1) as f64;
    let node_steps = labels_per_s / n as f64;
    let synthetic_proofs =
        sealer_proofs::synth::enabled(cfg).then(|| sealer_proofs::synth::cost(cfg.sector_size)).flatten().map(|c| {
            let cpus = sealer_proofs::synth::cpus(cfg);
            SynthPlan {
                challenges: c.challenges,
                peak_memory_bytes: c.peak_memory_bytes,
                file_bytes_per_sector: c.file_bytes,
                cpus,
                seconds: c.cpu_seconds * n as f64 / cpus as f64,
            }
        });
    let per_sector = sealer_pc2::output_bytes_per_sector(cfg.sector_size, layers, layer_files)
        + synthetic_proofs.as_ref().map_or(0, |s| s.file_bytes_per_sector);
    let r = Resources {
        sectors: n,
        sector_size: cfg.sector_size,
        layers,
        labels,
        slot_bytes: layers as u64 * g.ppl * sealer_storage::PAGE as u64,
        bytes_per_device: stripe.bytes_per_device(layers),
        buffer_bytes,
        hugepages_1gi_needed: buffer_bytes.div_ceil(sealer_storage::HUGEPAGE as u64),
        parent_cache_bytes: sealer_graph::store::cache_bytes(cfg.nodes()),
        output_bytes_per_sector: per_sector,
        output_bytes: per_sector * n as u64,
        hashers,
        labels_per_second_per_hasher: rate,
        pc1_seconds: labels as f64 / labels_per_s,
        previous_layer_in_memory: g.keep_prev_layer,
        previous_layer_resident: if g.keep_prev_layer { 1.0 } else { g.resident as f64 / g.nodes as f64 },
        read_iops: if g.keep_prev_layer {
            0.0
        } else {
            node_steps * sealer_slot::geometry::expander_reads_per_node(g.resident as f64 / g.nodes as f64)
        },
        write_iops: node_steps / g.npp as f64,
        synthetic_proofs,
    };
    (r, g)
}

/// Check `cfg` against this machine and estimate its needs; `storage` are the layer devices'
/// measured bandwidths (None: PC2's reads and writes bounds are left out).
pub fn plan(cfg: &BatchConfig, tuning: Tuning, rate: f64, layer_files: bool, storage: Option<&StorageFigures>) -> Plan {
    let (r, _) = resources(cfg, tuning, rate, layer_files);
    let mut checks = Vec::new();

    // Layout on the CPUs this process may use.
    let layout = cfg.effective_layout();
    let granted: Vec<usize> = sealer_config::allowed_cpus();
    checks.push(
        match layout
            .validate(cfg.sectors.len())
            .and_then(|_| layout.fit_to(&granted, &sealer_config::CpuTopology::from_sysfs(&granted)))
        {
            Ok((_, fit)) => check("layout", true, format!("{} hashers; {}", r.hashers, fit.describe())),
            Err(e) => check("layout", false, e.to_string()),
        },
    );

    // Parent cache.
    let name = cfg.proof_name();
    checks.push(match &cfg.parent_cache_dir {
        None => check(
            "parent cache",
            true,
            format!("built or reused under FIL_PROOFS_PARENT_CACHE ({} for {name})", gib(r.parent_cache_bytes)),
        ),
        Some(dir) => match sealer_graph::store::read_manifest(dir, &name) {
            None => check(
                "parent cache",
                false,
                format!("no manifest {name}.json in {}: run `sealer parent-cache --proof {name} --dir {}`", dir.display(), dir.display()),
            ),
            Some(m) if !m.verified || m.building => check(
                "parent cache",
                false,
                format!("{name} in {} is {}: wait for it or rebuild it with `sealer parent-cache`", dir.display(),
                    if m.building { format!("building ({:.0} %)", m.percent) } else { "not verified".into() }),
            ),
            Some(m) => match std::fs::metadata(dir.join(&m.file)) {
                Ok(md) if md.len() == m.bytes && m.bytes == r.parent_cache_bytes => {
                    check("parent cache", true, format!("{name}: {} verified (digest checked when the batch runs)", m.file))
                }
                Ok(md) => check(
                    "parent cache",
                    false,
                    format!("{} is {} bytes, its manifest says {} and the graph needs {}: rebuild it with `sealer parent-cache`",
                        m.file, md.len(), m.bytes, r.parent_cache_bytes),
                ),
                Err(e) => check("parent cache", false, format!("{}: {e}: rebuild it with `sealer parent-cache`", m.file)),
            },
        },
    });

    // Layer devices.
    for p in &cfg.layers.paths {
        let what = format!("layer device {}", p.display());
        let need = r.bytes_per_device;
        checks.push(match device_bytes(p) {
            Ok(Some((size, true))) if size < need => check(
                &what,
                false,
                format!(
                    "block device of {}, the slot needs {} on it: a smaller batch, or more devices",
                    gib(size),
                    gib(need)
                ),
            ),
            Ok(Some((size, true))) => {
                check(&what, true, format!("block device of {}, the slot needs {}", gib(size), gib(need)))
            }
            Ok(Some((size, false))) if size >= need => {
                check(&what, true, format!("file of {}, the slot needs {}", gib(size), gib(need)))
            }
            Ok(existing) => {
                // A file is created or grown at run time: the rest must be free.
                let grow = need - existing.map_or(0, |e| e.0);
                match free_bytes(p) {
                    Some((free, fs)) if free >= grow => check(
                        &what,
                        true,
                        format!("file grown to {} at run time; {} free on {}", gib(need), gib(free), fs.display()),
                    ),
                    Some((free, fs)) => check(
                        &what,
                        false,
                        format!(
                            "the file needs {} more and {} has {} free: free space, or use a larger device",
                            gib(grow),
                            fs.display(),
                            gib(free)
                        ),
                    ),
                    None => check(
                        &what,
                        false,
                        "no file system holds it: give an existing directory or a block device".into(),
                    ),
                }
            }
            Err(e) => check(&what, false, format!("{e}")),
        });
    }

    // Hugepages.
    let want = cfg.hugepages_1gi as u64;
    let free = free_hugepages_1g();
    checks.push(match (want, free) {
        (0, _) => check(
            "hugepages",
            true,
            format!("none given (hugepages_1gi = 0): buffers of {} on ordinary pages; {} x 1 GiB would hold them", gib(r.buffer_bytes), r.hugepages_1gi_needed),
        ),
        (w, Some(f)) if f >= w.min(r.hugepages_1gi_needed) => {
            check("hugepages", true, format!("{} of {w} given pages used for {} of buffers; {f} free on the node", w.min(r.hugepages_1gi_needed), gib(r.buffer_bytes)))
        }
        (w, f) => check(
            "hugepages",
            false,
            format!("{w} x 1 GiB given but {} free: reserve them (hugepagesz=1G hugepages=N), or the sealer falls back to ordinary pages",
                f.map_or("none".into(), |f| f.to_string())),
        ),
    });

    // Output space.
    checks.push(match free_bytes(&cfg.output_dir) {
        Some((free, fs)) if free >= r.output_bytes => check(
            "output space",
            true,
            format!("{} needed, {} free on {}", gib(r.output_bytes), gib(free), fs.display()),
        ),
        Some((free, fs)) => check(
            "output space",
            false,
            format!(
                "{} needed but {} free on {}: free space or write elsewhere",
                gib(r.output_bytes),
                gib(free),
                fs.display()
            ),
        ),
        None => check("output space", false, format!("no file system holds {}", cfg.output_dir.display())),
    });

    // Synthetic proofs: one sector's in memory at a time.
    if let Some(s) = &r.synthetic_proofs {
        let what = "memory for synthetic proofs";
        let need = s.peak_memory_bytes;
        checks.push(match available_memory() {
            Some((have, from)) if have >= need => check(
                what,
                true,
                format!("{} per sector (one sector at a time), {} available ({from})", gib(need), gib(have)),
            ),
            Some((have, from)) => check(
                what,
                false,
                format!(
                    "the synthetic proofs of one sector need {} but {} is available ({from}): raise the memory limit \
                     or free memory to {}, or run the batch on a node with more memory",
                    gib(need),
                    gib(have),
                    gib(need)
                ),
            ),
            None => check(what, true, format!("{} per sector; the memory available here is unknown", gib(need))),
        });
    }

    // Data sectors' files (by size; their content is checked when the batch runs).
    for s in cfg.sectors.iter().filter(|s| s.data.is_some()) {
        let d = s.data.as_ref().expect("data sector");
        let what = format!("data of sector {}", s.sector_id);
        checks.push(match std::fs::metadata(&d.path) {
            Ok(m) if m.len() <= cfg.sector_size => {
                check(&what, true, format!("{} ({} bytes)", d.path.display(), m.len()))
            }
            Ok(m) => check(&what, false, format!("{} is {} bytes, longer than the sector", d.path.display(), m.len())),
            Err(e) => check(&what, false, format!("{}: {e}", d.path.display())),
        });
    }
    let pc2_gpu =
        (cfg.pc2_engine == sealer_config::Pc2Engine::Gpu).then(|| gpu_check(cfg, tuning, &mut checks)).flatten();
    let gpu = cfg.pc2_engine == sealer_config::Pc2Engine::Gpu;
    let units =
        if gpu { pc2_gpu.as_ref().map_or(1, |g| g.devices.len().max(1)) } else { sealer_proofs::synth::cpus(cfg) };
    let none = StorageFigures {
        basis:
            "no storage figures (`sealer plan --qualification <sealer qualify document>`): reads and writes left out"
                .into(),
        ..Default::default()
    };
    let st = storage.unwrap_or(&none);
    let bounds = sealer_pc2::bounds::pc2_bounds(&sealer_pc2::bounds::Pc2Input {
        sector_size: cfg.sector_size,
        sectors: cfg.sectors.len(),
        layers: cfg.num_layers(),
        gpu,
        cpus: units,
        gpus: units,
        read_bytes_per_second: st.read_bytes_per_second,
        write_bytes_per_second: st.write_bytes_per_second,
    });
    let pc2 = Pc2Plan {
        engine: if gpu { "gpu" } else { "cpu" }.into(),
        units,
        seconds_per_sector: bounds.seconds / cfg.sectors.len().max(1) as f64,
        bounds,
        storage_basis: st.basis.clone(),
    };
    Plan { checks, resources: r, pc2_gpu, pc2 }
}

/// The plan as a text table.
pub fn render(p: &Plan) -> String {
    let r = &p.resources;
    let mut out = String::new();
    for c in &p.checks {
        out += &format!("{:4} {:<28} {}\n", if c.ok { "ok" } else { "FAIL" }, c.what, c.detail);
    }
    out += &format!(
        "\nbatch: {} x {} sectors, {} layers, {:.3e} labels\n\
         layer slot: {} ({} per device)\n\
         sealer buffers: {} ({} x 1 GiB hugepages)\n\
         parent cache: {}\n\
         outputs: {} per sector, {} for the batch\n\
         PC1 at {:.2} M labels/s per hasher x {} hashers: {:.0} s; expander parents {} ({:.0} 4 KiB reads/s), {:.0} 4 KiB writes/s\n",
        r.sectors,
        gib(r.sector_size),
        r.layers,
        r.labels as f64,
        gib(r.slot_bytes),
        gib(r.bytes_per_device),
        gib(r.buffer_bytes),
        r.hugepages_1gi_needed,
        gib(r.parent_cache_bytes),
        gib(r.output_bytes_per_sector),
        gib(r.output_bytes),
        r.labels_per_second_per_hasher / 1e6,
        r.hashers,
        r.pc1_seconds,
        if r.previous_layer_in_memory {
            "from memory".to_string()
        } else {
            format!("{:.0} % from storage", 100.0 * (1.0 - r.previous_layer_resident))
        },
        r.read_iops,
        r.write_iops,
    );
    let c = &p.pc2;
    let b = &c.bounds;
    let gbps = |bytes: u64, s: f64| {
        if s > 0.0 {
            format!("{:.1} GB/s", bytes as f64 / s / 1e9)
        } else {
            "not measured".into()
        }
    };
    out += &format!(
        "PC2 on the {} engine ({} {}): {:.1} s per sector, {:.0} s for the batch, bound by {}: kernels {:.0} s, copies {:.0} s, reads {:.0} s ({:.0} GB, {}), writes {:.0} s ({:.0} GB, {}); {}\n",
        c.engine,
        c.units,
        if c.engine == "gpu" { "GPU(s)" } else { "CPU(s)" },
        c.seconds_per_sector,
        b.seconds,
        b.bound.as_str(),
        b.kernel_seconds,
        b.copy_seconds,
        b.read_seconds,
        b.read_bytes as f64 / 1e9,
        gbps(b.read_bytes, b.read_seconds),
        b.write_seconds,
        b.write_bytes as f64 / 1e9,
        gbps(b.write_bytes, b.write_seconds),
        c.storage_basis,
    );
    if let Some(s) = &r.synthetic_proofs {
        out += &format!(
            "synthetic proofs: {} challenges per sector, one sector at a time: {} of memory, {} file per sector (in the outputs); {:.0} s on {} CPU{}\n",
            s.challenges,
            gib(s.peak_memory_bytes),
            gib(s.file_bytes_per_sector),
            s.seconds,
            s.cpus,
            if s.cpus == 1 { "" } else { "s" },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_32gib_batch_of_32_needs_what_the_readme_says() {
        let v = serde_json::json!({
            "registered_proof": "StackedDrg32GiBV1_1",
            "sectors": (0..32).map(|i| serde_json::json!({"prover_id": "00".repeat(32), "sector_id": i, "ticket": "11".repeat(32)})).collect::<Vec<_>>(),
            "layers": {"paths": ["/dev/nvme0n1", "/dev/nvme1n1"], "slot_offset": 0}, "output_dir": "/out"
        });
        let cfg = BatchConfig::from_json(&v.to_string()).unwrap();
        let (r, g) = resources(&cfg, Tuning::default(), 1e6, true);
        assert_eq!(r.slot_bytes, 11 * 32 * (32u64 << 30));
        assert_eq!(r.bytes_per_device, r.slot_bytes / 2);
        assert_eq!(r.parent_cache_bytes, 56 << 30);
        assert_eq!(r.output_bytes_per_sector, 520_381_309_408, "the operator's booking (internal/placement golden)");
        assert!(!r.previous_layer_in_memory && !g.keep_prev_layer);
        // 8 expander page reads per node step, one page write per 4 node steps (N = 32: 4 nodes a page).
        let steps = 1e6 * r.hashers as f64 / 32.0;
        assert_eq!((r.read_iops, r.write_iops), (8.0 * steps, steps / 4.0));
        // Half of the previous layer resident (16 GiB × 32 = 512 GiB): half the reads, and the
        // memory counted in the buffers.
        let (h, _) = resources(&cfg, Tuning { resident_bytes: 512 << 30, ..Tuning::default() }, 1e6, true);
        assert_eq!((h.previous_layer_resident, h.read_iops), (0.5, 4.0 * steps));
        assert_eq!(h.buffer_bytes, r.buffer_bytes + (512 << 30));
        assert!(r.synthetic_proofs.is_none());
    }

    /// A SyntheticPoRep batch of 4 × 8 MiB on a layout of 2 CPUs: 2^18 challenges per sector,
    /// one sector's streaming-writer bound in memory (not the batch's), its 6.2 GB proofs file
    /// in the outputs, its CPU-seconds (contracts/synth-costs.json) over the layout's 2 CPUs.
    #[test]
    fn an_8mib_synthetic_batch_plans_its_proofs() {
        let v = serde_json::json!({
            "registered_proof": "StackedDrg8MiBV1_1_Feat_SyntheticPoRep",
            "sectors": (0..4).map(|i| serde_json::json!({"prover_id": "00".repeat(32), "sector_id": i, "ticket": "11".repeat(32)})).collect::<Vec<_>>(),
            "layers": {"paths": ["/dev/nvme0n1"], "slot_offset": 0}, "output_dir": "/out",
            "layout": {"batch_size": 4, "supported": true, "coordinators": [{"cpu": 0, "hashers": [{"cpu": 1, "sectors": 4}]}],
                "roles": {"writer": 0, "reader": 0, "orchestrator": 0, "pc2_reader": 0, "pc2_hasher": 0,
                    "pc2_hasher_cpu": 0, "pc2_writer": 0, "c1_reader": 0}}
        });
        let cfg = BatchConfig::from_json(&v.to_string()).unwrap();
        let (r, _) = resources(&cfg, Tuning::default(), 1e6, true);
        let s = r.synthetic_proofs.as_ref().expect("synthetic proofs planned");
        assert_eq!(s.challenges, 1 << 18);
        let cost = sealer_proofs::synth::cost(8 << 20).unwrap();
        assert_eq!(s.peak_memory_bytes, cost.peak_memory_bytes, "one sector's, not the batch's");
        assert!(s.peak_memory_bytes < 256 << 20);
        assert_eq!(s.file_bytes_per_sector, 96 + (1 << 18) * 23_704);
        assert_eq!((s.cpus, s.seconds), (2, cost.cpu_seconds * 4.0 / 2.0));
        let pc2 = sealer_pc2::output_bytes_per_sector(8 << 20, 2, true);
        assert_eq!(r.output_bytes_per_sector, pc2 + s.file_bytes_per_sector);
        assert_eq!(r.output_bytes, 4 * r.output_bytes_per_sector);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["synthetic_proofs"]["peak_memory_bytes"], cost.peak_memory_bytes);
        let p = plan(&cfg, Tuning::default(), 1e6, true, None);
        let c = p.checks.iter().find(|c| c.what == "memory for synthetic proofs").expect("the memory check");
        assert!(c.ok, "{c:?}");
        assert!(render(&p).contains("synthetic proofs: 262144 challenges per sector"), "{}", render(&p));
    }

    /// The cgroup's memory limit: v2 and v1, under the process's cgroup or the mount's root;
    /// none set is no limit.
    #[test]
    fn memory_limit_comes_from_the_cgroup() {
        let files = |fs: &'static [(&'static str, &'static str)]| {
            move |p: &Path| fs.iter().find(|f| Path::new(f.0) == p).map(|f| f.1.to_string())
        };
        let v2 = files(&[("/sys/fs/cgroup/memory.max", "34359738368\n")]);
        assert_eq!(cgroup_memory_limit("0::/\n", &v2).map(|l| l.0), Some(32 << 30));
        let unlimited = files(&[("/sys/fs/cgroup/memory.max", "max\n")]);
        assert_eq!(cgroup_memory_limit("0::/\n", &unlimited), None);
        let v1 = files(&[
            ("/sys/fs/cgroup/memory/kubepods/pod1/memory.limit_in_bytes", "1073741824\n"),
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"),
        ]);
        let hybrid = "4:memory:/kubepods/pod1\n3:cpuset:/\n0::/\n";
        assert_eq!(cgroup_memory_limit(hybrid, &v1).map(|l| l.0), Some(1 << 30));
        assert_eq!(cgroup_memory_limit("4:memory:/elsewhere\n", &v1), None);
    }
}
