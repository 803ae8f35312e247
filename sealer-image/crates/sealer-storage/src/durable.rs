//! Durable file steps: write-and-sync, atomic replace, rename with the directory synced.
//!
//! The rule they keep: data is synced before the record that claims it, and a rename is not
//! done until its directory is synced. Every step passes a named crash point
//! ([`crash_point`]), so a test can stop the process at any of them and check what a resume
//! makes of the files left behind.
//!
//! **Lost writes** (as ALICE and CrashMonkey test file systems): with [`LOSE_ENV`] set to a
//! directory, every output file the sealer writes is tracked ([`track`]) with its contents as
//! of its last sync ([`synced`]). A crash point that ends the process first saves those synced
//! contents there (`index`: one `<file>\t<path>` line each); a test puts them back, so the
//! files are as a power loss at that moment leaves them (unsynced writes gone), and resumes.
//! Names are taken as durable once created (directory syncs are not modelled).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The environment variable that arms a crash point: `<name>:<n>` aborts the process (as a
/// kill would: no destructors, no buffered output) at the `n`-th pass (from 1) of the point
/// named `<name>`. Test-only: production never sets it.
pub const CRASH_ENV: &str = "SEALER_TEST_CRASH_AT";

/// The exit status of a process stopped at a crash point (SIGKILL's shell status).
pub const CRASH_EXIT: i32 = 137;

/// The environment variable that turns on lost-writes tracking: a directory where a crash
/// point saves the synced contents of every tracked file before it ends the process.
pub const LOSE_ENV: &str = "SEALER_TEST_LOSE_UNSYNCED";

fn lose_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| std::env::var_os(LOSE_ENV).map(PathBuf::from)).as_deref()
}

/// Per tracked file, its contents as of its last sync.
fn synced_contents() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, Vec<u8>>> {
    static M: OnceLock<Mutex<BTreeMap<PathBuf, Vec<u8>>>> = OnceLock::new();
    M.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Lost-writes mode: `path` is an output file whose writes a crash may lose; what it holds now
/// (nothing, for a file just created) is what survives until it is [`synced`].
pub fn track(path: &Path) {
    if lose_dir().is_some() {
        let now = std::fs::read(path).unwrap_or_default();
        synced_contents().insert(path.to_path_buf(), now);
    }
}

/// Lost-writes mode: `path` was just synced; its contents now survive a crash.
pub fn synced(path: &Path) {
    if lose_dir().is_some() {
        if let Ok(now) = std::fs::read(path) {
            synced_contents().insert(path.to_path_buf(), now);
        }
    }
}

/// Save the synced contents of every tracked file into the lost-writes directory `dir`.
fn save_synced(dir: &Path) {
    let m = synced_contents();
    let _ = std::fs::create_dir_all(dir);
    let mut index = String::new();
    for (i, (path, c)) in m.iter().enumerate() {
        if std::fs::write(dir.join(i.to_string()), c).is_ok() {
            index += &format!("{i}\t{}\n", path.display());
        }
    }
    let _ = std::fs::write(dir.join("index"), index);
}

/// Put back the files a crash in lost-writes mode saved in `dir` (what a test does before it
/// resumes): each tracked file as it was at its last sync. Returns how many.
pub fn restore_synced(dir: &Path) -> io::Result<usize> {
    let index = std::fs::read_to_string(dir.join("index"))?;
    let mut n = 0;
    for line in index.lines() {
        let (file, path) = line.split_once('\t').ok_or_else(|| io::Error::other(format!("bad index line {line:?}")))?;
        let path = Path::new(path);
        // A file removed after it was tracked (a scratch file) stays removed.
        if path.exists() {
            std::fs::write(path, std::fs::read(dir.join(file))?)?;
            n += 1;
        }
    }
    Ok(n)
}

fn armed() -> Option<&'static (String, u64)> {
    static ARMED: OnceLock<Option<(String, u64)>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let v = std::env::var(CRASH_ENV).ok()?;
            let (name, n) = v.rsplit_once(':')?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .as_ref()
}

/// A named point of a durable step: with [`CRASH_ENV`] set to `name:n`, the `n`-th pass ends
/// the process at once. Points print their name once when `SEALER_TEST_CRASH_LIST` is set, so a
/// test can enumerate every point a run passes.
pub fn crash_point(name: &str) {
    static PASSES: AtomicU64 = AtomicU64::new(0);
    static LIST: OnceLock<bool> = OnceLock::new();
    if *LIST.get_or_init(|| std::env::var_os("SEALER_TEST_CRASH_LIST").is_some()) {
        eprintln!("crash point: {name}");
    }
    let Some((want, n)) = armed() else { return };
    if want == name && PASSES.fetch_add(1, Ordering::SeqCst) + 1 == *n {
        eprintln!("stopped at crash point {name}:{n} ({CRASH_ENV})");
        if let Some(dir) = lose_dir() {
            save_synced(dir);
        }
        // SAFETY: _exit ends the process without running anything else, as a kill does.
        unsafe { libc::_exit(CRASH_EXIT) };
    }
}

fn ctx(e: io::Error, what: &str, p: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()))
}

/// Sync the directory `dir` itself: the names created, renamed or removed in it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let d = File::open(dir).map_err(|e| ctx(e, "opening directory", dir))?;
    match d.sync_all() {
        // Some file systems cannot sync a directory; their names are as durable as they get.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r.map_err(|e| ctx(e, "syncing directory", dir)),
    }
}

fn parent(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Create (truncate) `path` with `bytes` and sync it: the data is durable, the name not yet
/// (rename it with [`rename`], or sync its directory).
pub fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = File::create(path).map_err(|e| ctx(e, "creating", path))?;
    track(path);
    crash_point("durable.create");
    f.write_all(bytes).map_err(|e| ctx(e, "writing", path))?;
    crash_point("durable.write");
    f.sync_all().map_err(|e| ctx(e, "syncing", path))?;
    synced(path);
    crash_point("durable.sync");
    Ok(())
}

/// Rename `from` to `to`, then sync the directory of `to` (and of `from` when it differs).
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    rename_only(from, to)?;
    sync_dir(parent(to))?;
    if parent(from) != parent(to) {
        sync_dir(parent(from))?;
    }
    crash_point("durable.rename-synced");
    Ok(())
}

/// Rename `from` to `to` without syncing a directory (the caller syncs it once after several):
/// a crash point, and a tracked file keeps its synced contents under its new name.
pub fn rename_only(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
        .map_err(|e| io::Error::new(e.kind(), format!("renaming {} to {}: {e}", from.display(), to.display())))?;
    if lose_dir().is_some() {
        let mut m = synced_contents();
        if let Some(c) = m.remove(from) {
            m.insert(to.to_path_buf(), c);
        }
    }
    crash_point("durable.rename");
    Ok(())
}

/// Remove `path` (absent is fine) and sync its directory: a removal a later step relies on
/// (a checkpoint that must not be trusted again) survives a power loss.
pub fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ctx(e, "removing", path)),
    }
    if lose_dir().is_some() {
        synced_contents().remove(path);
    }
    crash_point("durable.remove");
    sync_dir(parent(path))
}

/// `path` with `.tmp` appended: where a file is written before it is renamed into place.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Replace `path` with `bytes` atomically and durably: written and synced under the `.tmp`
/// name, renamed, the directory synced. A crash leaves the old file or the new one, whole.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(path);
    write_synced(&tmp, bytes)?;
    rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_leaves_the_new_bytes_and_no_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        replace(&p, b"one").unwrap();
        replace(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert!(!tmp_path(&p).exists());
    }

    #[test]
    fn remove_of_an_absent_file_is_fine_and_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        remove(&dir.path().join("gone")).unwrap();
        let e = write_synced(&dir.path().join("no/such/dir/f"), b"x").unwrap_err();
        assert!(e.to_string().contains("no/such/dir/f"), "{e}");
        let e = rename(&dir.path().join("a"), &dir.path().join("b")).unwrap_err();
        assert!(e.to_string().contains("renaming"), "{e}");
    }
}
