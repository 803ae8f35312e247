//! PC2's output files, written behind the hashing: each write is handed to writer threads as
//! an aligned chunk and the caller goes on. Whole aligned chunks go through an `O_DIRECT`
//! descriptor (no page-cache copy, no dirty pages for the kernel to flush later) where the file
//! system takes it; the rest (the small top rows of a tree, a range's unaligned tail) through an
//! ordinary one. A file is synced when its writer asks ([`OutputFile::sync_data`]): once when it
//! is complete, and at PC2's checkpoints.

use sealer_storage::{durable, AlignedBuf, PAGE};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// The bytes one write request carries at most.
pub const CHUNK: usize = 1 << 20;

/// Writer threads, shared by every output file of the process.
const THREADS: usize = 2;

/// Chunks queued ahead of the writers at most (32 MiB): a producer faster than the storage
/// waits here instead of growing memory.
const QUEUED: usize = 32;

struct Job {
    file: Arc<Inner>,
    offset: u64,
    buf: AlignedBuf,
    len: usize,
}

impl Job {
    /// Write the chunk and report it to its file, whatever happens: a panic in the write
    /// (a bug) becomes the file's error instead of a count that never reaches zero, so
    /// [`OutputFile::wait`] never hangs.
    fn run(self) {
        let Job { file, offset, buf, len } = self;
        durable::crash_point("pc2.write");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.write(&buf.as_slice()[..len], offset)))
            .unwrap_or_else(|p| {
                let why =
                    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
                Err(io::Error::other(format!("the writer thread panicked: {}", why.unwrap_or_default())))
            });
        file.done(r);
        recycle(buf);
    }
}

fn queue() -> &'static SyncSender<Job> {
    static Q: OnceLock<SyncSender<Job>> = OnceLock::new();
    Q.get_or_init(|| {
        let (tx, rx) = sync_channel::<Job>(QUEUED);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..THREADS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("pc2-writer-{i}"))
                .spawn(move || loop {
                    // The lock only for the receive: the writers write at once. A writer that
                    // panicked held no lock (see `Job::run`), so the lock is never poisoned.
                    let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok(job) = next else { return };
                    job.run();
                })
                .expect("starting a PC2 writer thread");
        }
        tx
    })
}

/// Whole chunks written and free again: the next chunks come from here instead of new
/// (zeroed, page-faulted) memory.
static POOL: Mutex<Vec<AlignedBuf>> = Mutex::new(Vec::new());

/// A buffer of `cap` bytes for a chunk: a recycled one when it is a whole [`CHUNK`].
pub fn chunk(cap: usize) -> AlignedBuf {
    if cap == CHUNK {
        if let Some(b) = POOL.lock().expect("chunk pool").pop() {
            return b;
        }
    }
    AlignedBuf::new(cap)
}

fn recycle(b: AlignedBuf) {
    if b.len() == CHUNK && !b.on_hugepages() {
        let mut pool = POOL.lock().expect("chunk pool");
        if pool.len() < QUEUED + 2 * THREADS {
            pool.push(b);
        }
    }
}

struct State {
    pending: usize,
    error: Option<io::Error>,
}

struct Inner {
    path: PathBuf,
    buffered: File,
    /// The same file opened with `O_DIRECT` (None: the file system refused it).
    direct: Option<File>,
    state: Mutex<State>,
    idle: Condvar,
}

impl Inner {
    fn write(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        let aligned = offset.is_multiple_of(PAGE as u64) && bytes.len().is_multiple_of(PAGE);
        if let Some(d) = self.direct.as_ref().filter(|_| aligned) {
            match d.write_all_at(bytes, offset) {
                // Some file systems open O_DIRECT but refuse the write: the page cache then.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                r => return r,
            }
        }
        self.buffered.write_all_at(bytes, offset)
    }

    fn done(&self, r: io::Result<()>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.pending -= 1;
        if let Err(e) = r {
            st.error.get_or_insert(io::Error::new(e.kind(), format!("writing {}: {e}", self.path.display())));
        }
        if st.pending == 0 {
            self.idle.notify_all();
        }
    }
}

/// One output file (a replica, a tree) written through the writer threads.
#[derive(Clone)]
pub struct OutputFile {
    inner: Arc<Inner>,
}

impl OutputFile {
    /// Create (truncate) `path` at `len` bytes.
    pub fn create(path: &Path, len: u64) -> io::Result<Self> {
        let f = File::create(path)?;
        f.set_len(len)?;
        let out = Self::from_file(path, f)?;
        durable::crash_point("pc2.create");
        Ok(out)
    }

    /// Open an existing `path` for writing (a resumed run's).
    pub fn open(path: &Path) -> io::Result<Self> {
        let f = OpenOptions::new().write(true).open(path)?;
        Self::from_file(path, f)
    }

    /// An output file over `buffered`, opened for writing (and again with `O_DIRECT`).
    pub fn from_file(path: &Path, buffered: File) -> io::Result<Self> {
        durable::track(path);
        let direct = OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path).ok();
        Ok(OutputFile {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                buffered,
                direct,
                state: Mutex::new(State { pending: 0, error: None }),
                idle: Condvar::new(),
            }),
        })
    }

    /// True when whole aligned chunks bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.inner.direct.is_some()
    }

    /// Bytes of the file.
    pub fn file_len(&self) -> io::Result<u64> {
        Ok(self.inner.buffered.metadata()?.len())
    }

    /// Queue `len` bytes of `buf` for `offset`; an earlier write's failure is returned here
    /// (or by the next [`wait`](Self::wait)).
    pub fn write_buf(&self, buf: AlignedBuf, len: usize, offset: u64) -> io::Result<()> {
        {
            let mut st = self.inner.state.lock().expect("output file state");
            if let Some(e) = st.error.take() {
                return Err(e);
            }
            st.pending += 1;
        }
        let job = Job { file: self.inner.clone(), offset, buf, len };
        if let Err(e) = queue().send(job) {
            // The writers are gone (never: they live as long as the process); write here.
            e.0.run();
        }
        Ok(())
    }

    /// Queue a copy of `bytes` for `offset`, in chunks of at most [`CHUNK`].
    pub fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        for (i, part) in bytes.chunks(CHUNK).enumerate() {
            let mut buf = chunk(part.len());
            buf.as_mut_slice().copy_from_slice(part);
            self.write_buf(buf, part.len(), offset + (i * CHUNK) as u64)?;
        }
        Ok(())
    }

    /// Wait until every queued write is in the file; the first failure among them.
    pub fn wait(&self) -> io::Result<()> {
        let mut st = self.inner.state.lock().expect("output file state");
        while st.pending > 0 {
            st = self.inner.idle.wait(st).expect("output file state");
        }
        st.error.take().map_or(Ok(()), Err)
    }

    /// [`wait`](Self::wait), then make the data durable.
    pub fn sync_data(&self) -> io::Result<()> {
        self.wait()?;
        self.inner.buffered.sync_data()?;
        durable::synced(&self.inner.path);
        durable::crash_point("pc2.sync");
        Ok(())
    }

    /// [`wait`](Self::wait), then make data and metadata durable.
    pub fn sync_all(&self) -> io::Result<()> {
        self.wait()?;
        self.inner.buffered.sync_all()?;
        durable::synced(&self.inner.path);
        durable::crash_point("pc2.sync");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_writes_land_where_they_were_asked_aligned_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = OutputFile::create(&p, 5 * CHUNK as u64 + 100).unwrap();
        let mut want = vec![0u8; 5 * CHUNK + 100];
        for (i, b) in want.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        // Aligned whole chunks, a long unaligned run and a short tail, out of order.
        f.write_at(&want[3 * CHUNK..5 * CHUNK + 100], 3 * CHUNK as u64).unwrap();
        f.write_at(&want[..PAGE], 0).unwrap();
        f.write_at(&want[PAGE..3 * CHUNK], PAGE as u64).unwrap();
        f.sync_all().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), want);
    }

    #[test]
    fn a_failed_write_is_reported_to_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = OutputFile::create(&p, 10).unwrap();
        // Opened read-only underneath: every write fails.
        let ro = OutputFile {
            inner: Arc::new(Inner {
                path: p.clone(),
                buffered: File::open(&p).unwrap(),
                direct: None,
                state: Mutex::new(State { pending: 0, error: None }),
                idle: Condvar::new(),
            }),
        };
        ro.write_at(b"abc", 0).unwrap();
        let e = ro.wait().unwrap_err();
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        assert!(ro.wait().is_ok(), "reported once");
        f.wait().unwrap();
    }

    #[test]
    fn a_writer_that_panics_fails_its_file_and_wait_returns() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = OutputFile::create(&p, 4 * PAGE as u64).unwrap();
        // A length past the buffer's end: the slice in the writer panics.
        f.write_buf(AlignedBuf::new(PAGE), 2 * PAGE, 0).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let g = f.clone();
        std::thread::spawn(move || tx.send(g.wait().map_err(|e| e.to_string())).unwrap());
        let got = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("wait() returned");
        assert!(got.unwrap_err().contains("panicked"));
        // The writers still write.
        f.write_at(&[7u8; 100], 0).unwrap();
        f.sync_all().unwrap();
        assert_eq!(&std::fs::read(&p).unwrap()[..100], &[7u8; 100]);
    }
}
