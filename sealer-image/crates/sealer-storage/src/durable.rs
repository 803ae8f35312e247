//! Durable file steps: write-and-sync, atomic replace, rename with the directory synced.
//!
//! The rule they keep: data is synced before the record that claims it, and a rename is not
//! done until its directory is synced. Every step passes a named crash point
//! ([`crash_point`]), so a test can stop the process at any of them and check what a resume
//! makes of the files left behind.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable that arms a crash point: `<name>:<n>` aborts the process (as a
/// kill would: no destructors, no buffered output) at the `n`-th pass (from 1) of the point
/// named `<name>`. Test-only: production never sets it.
pub const CRASH_ENV: &str = "SEALER_TEST_CRASH_AT";

/// The exit status of a process stopped at a crash point (SIGKILL's shell status).
pub const CRASH_EXIT: i32 = 137;

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
    if std::env::var_os("SEALER_TEST_CRASH_LIST").is_some() {
        eprintln!("crash point: {name}");
    }
    let Some((want, n)) = armed() else { return };
    if want == name && PASSES.fetch_add(1, Ordering::SeqCst) + 1 == *n {
        eprintln!("stopped at crash point {name}:{n} ({CRASH_ENV})");
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
    crash_point("durable.create");
    f.write_all(bytes).map_err(|e| ctx(e, "writing", path))?;
    crash_point("durable.write");
    f.sync_all().map_err(|e| ctx(e, "syncing", path))?;
    crash_point("durable.sync");
    Ok(())
}

/// Rename `from` to `to`, then sync the directory of `to` (and of `from` when it differs).
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
        .map_err(|e| io::Error::new(e.kind(), format!("renaming {} to {}: {e}", from.display(), to.display())))?;
    crash_point("durable.rename");
    sync_dir(parent(to))?;
    if parent(from) != parent(to) {
        sync_dir(parent(from))?;
    }
    crash_point("durable.rename-synced");
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
