//! A node's parent-cache directory: each graph's cache file is built once (by
//! storage-proofs-porep, the code rust-fil-proofs runs), its SHA-256 recorded in a manifest
//! `<name>.json` beside it, and every later user checks the file against that digest before
//! mapping it (what `FIL_PROOFS_VERIFY_CACHE` does), so a truncated or corrupt cache is never
//! used. Sealer pods mount the directory read-only and never build.

use crate::{stacked_graph, GraphApi, GraphError, Parents, DEGREE};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The manifest of one cache in the directory (`<name>.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheManifest {
    /// What the cache is for (a registered proof name, e.g. `StackedDrg32GiBV1_1`).
    pub name: String,
    /// The cache file's name in the directory (`v28-sdr-parent-<hex>.cache`).
    #[serde(default)]
    pub file: String,
    /// Its size.
    #[serde(default)]
    pub bytes: u64,
    /// SHA-256 of the whole file, hex.
    #[serde(default)]
    pub digest: String,
    /// True once built and its digest recorded (and, for graphs in rust-fil-proofs'
    /// `parent_cache.json`, matched against it).
    #[serde(default)]
    pub verified: bool,
    /// True while a builder writes the file.
    #[serde(default)]
    pub building: bool,
    /// Build progress 0-100 (while building).
    #[serde(default)]
    pub percent: f64,
    /// Seconds the last build took.
    #[serde(default)]
    pub build_seconds: f64,
}

/// The manifest path of cache `name` in `dir`.
pub fn manifest_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

fn write_manifest(dir: &Path, m: &CacheManifest) -> std::io::Result<()> {
    let path = manifest_path(dir, &m.name);
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(m).expect("manifest serialises"))?;
    std::fs::rename(tmp, path)
}

/// Read cache `name`'s manifest.
pub fn read_manifest(dir: &Path, name: &str) -> Option<CacheManifest> {
    serde_json::from_slice(&std::fs::read(manifest_path(dir, name)).ok()?).ok()
}

/// SHA-256 of a file, hex.
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex_of(&h.finalize()))
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Bytes of a complete cache file for `nodes` nodes.
pub fn cache_bytes(nodes: u64) -> u64 {
    nodes * DEGREE as u64 * 4
}

/// Check cache `name` in `dir` and map it: its manifest must say verified, the file must have
/// the recorded size and digest. Nothing is built or changed (the directory may be read-only).
pub fn open_verified(dir: &Path, name: &str, nodes: u64) -> Result<Parents, GraphError> {
    let m = read_manifest(dir, name).ok_or_else(|| {
        GraphError(format!("no parent cache for {name} in {}: the node's cache is not built yet", dir.display()))
    })?;
    if !m.verified || m.file.is_empty() {
        return Err(GraphError(format!(
            "parent cache for {name} in {} is not verified (building: {})",
            dir.display(),
            m.building
        )));
    }
    let path = dir.join(&m.file);
    let len = std::fs::metadata(&path).map_err(|e| GraphError(format!("parent cache {}: {e}", path.display())))?.len();
    if len != m.bytes || len != cache_bytes(nodes) {
        return Err(GraphError(format!(
            "parent cache {} is corrupt: {len} bytes, its manifest says {} and the graph needs {}",
            path.display(),
            m.bytes,
            cache_bytes(nodes)
        )));
    }
    let digest = file_digest(&path).map_err(|e| GraphError(format!("reading parent cache {}: {e}", path.display())))?;
    if digest != m.digest {
        return Err(GraphError(format!(
            "parent cache {} is corrupt: SHA-256 {digest}, its manifest says {}",
            path.display(),
            m.digest
        )));
    }
    Parents::from_file(&path, nodes)
}

/// What [`build_or_verify`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// The recorded cache checked out: nothing built.
    Verified,
    /// Built (there was none, or the one there failed its check, with the reason).
    Built(Option<String>),
}

/// Make cache `name` in `dir` verified: keep it when its file matches its manifest, else
/// (missing, truncated, corrupt, or a file nobody recorded) build it with storage-proofs-porep
/// and record its digest. `FIL_PROOFS_PARENT_CACHE` must name `dir` (storage-proofs-porep reads
/// it once per process), with `FIL_PROOFS_VERIFY_CACHE` set so graphs it knows are checked
/// against its own manifest too. The manifest says `building` with a percent meanwhile.
pub fn build_or_verify(
    dir: &Path,
    name: &str,
    nodes: u64,
    porep_id: [u8; 32],
    api: GraphApi,
) -> Result<(CacheManifest, CacheOutcome), GraphError> {
    let io = |what: &str, e: std::io::Error| GraphError(format!("{what}: {e}"));
    std::fs::create_dir_all(dir).map_err(|e| io(&format!("creating {}", dir.display()), e))?;
    let mut why = None;
    if let Some(m) = read_manifest(dir, name) {
        if m.verified && !m.file.is_empty() {
            match open_verified(dir, name, nodes) {
                Ok(_) => return Ok((m, CacheOutcome::Verified)),
                Err(e) => {
                    why = Some(e.0);
                    let _ = std::fs::remove_file(dir.join(&m.file));
                }
            }
        } else if !m.file.is_empty() {
            // An unfinished build: its file cannot be trusted.
            let _ = std::fs::remove_file(dir.join(&m.file));
        }
    }
    let before: Vec<PathBuf> = cache_files(dir);
    let mut m = CacheManifest { name: name.to_string(), building: true, ..Default::default() };
    write_manifest(dir, &m).map_err(|e| io("writing the manifest", e))?;
    let t0 = Instant::now();
    let graph = stacked_graph(nodes, porep_id, api)?;
    let done = std::sync::atomic::AtomicBool::new(false);
    let cache = std::thread::scope(|s| {
        s.spawn(|| report_progress(dir, &before, nodes, &m, &done));
        let r = graph.parent_cache();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    })
    .map_err(|e| GraphError(format!("building the parent cache: {e:#}")))?;
    let mut path = cache.path.clone();
    if before.contains(&path) {
        // storage-proofs-porep opened a file that was already there, unrecorded: rebuild it
        // so the digest recorded is of a file built here.
        let _ = std::fs::remove_file(&path);
        path = graph.parent_cache().map_err(|e| GraphError(format!("rebuilding the parent cache: {e:#}")))?.path;
    }
    let bytes = std::fs::metadata(&path).map_err(|e| io("reading the built cache", e))?.len();
    if bytes != cache_bytes(nodes) {
        return Err(GraphError(format!(
            "built parent cache {} has {bytes} bytes, expected {}",
            path.display(),
            cache_bytes(nodes)
        )));
    }
    m = CacheManifest {
        name: name.to_string(),
        file: path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        bytes,
        digest: file_digest(&path).map_err(|e| io("hashing the built cache", e))?,
        verified: true,
        building: false,
        percent: 100.0,
        build_seconds: t0.elapsed().as_secs_f64(),
    };
    write_manifest(dir, &m).map_err(|e| io("writing the manifest", e))?;
    Ok((m, CacheOutcome::Built(why)))
}

fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return vec![] };
    rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "cache")).collect()
}

/// While storage-proofs-porep writes the new cache file, publish how much of it is allocated.
fn report_progress(
    dir: &Path,
    before: &[PathBuf],
    nodes: u64,
    m: &CacheManifest,
    done: &std::sync::atomic::AtomicBool,
) {
    let want = cache_bytes(nodes) as f64;
    let mut m = m.clone();
    while !done.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(500));
        if let Some(f) = cache_files(dir).into_iter().find(|p| !before.contains(p)) {
            if let Ok(md) = std::fs::metadata(&f) {
                let pct = (md.blocks() as f64 * 512.0 / want * 100.0).clamp(0.0, 99.0);
                if (pct - m.percent).abs() >= 1.0 && !done.load(std::sync::atomic::Ordering::Relaxed) {
                    m.percent = pct.floor();
                    let _ = write_manifest(dir, &m);
                }
            }
        }
    }
}
