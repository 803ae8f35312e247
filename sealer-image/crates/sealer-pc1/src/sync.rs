//! Progress counters shared between the engine's threads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Raised when another thread failed and the layer is being abandoned.
#[derive(Debug, Clone, Copy)]
pub struct Aborted;

/// A monotonically increasing counter that threads can wait on.
///
/// Waiting spins briefly (the common case on a machine with spare cores), then yields, then
/// sleeps on a condition variable with a short timeout, so oversubscribed machines do not
/// burn the cores the hashers need.
pub struct Counter {
    v: AtomicU64,
    m: Mutex<()>,
    cv: Condvar,
}

impl Default for Counter {
    fn default() -> Self {
        Self::new(0)
    }
}

impl Counter {
    /// A counter starting at `v`.
    pub fn new(v: u64) -> Self {
        Counter { v: AtomicU64::new(v), m: Mutex::new(()), cv: Condvar::new() }
    }
    /// Current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.v.load(Ordering::Acquire)
    }
    /// Publish a new value and wake waiters.
    pub fn set(&self, v: u64) {
        self.v.store(v, Ordering::Release);
        let _g = self.m.lock().unwrap();
        self.cv.notify_all();
    }
    /// Wake waiters without changing the value (used on abort).
    pub fn poke(&self) {
        let _g = self.m.lock().unwrap();
        self.cv.notify_all();
    }
    /// Wait until the value is at least `target`, or `abort` is raised.
    pub fn wait_at_least(&self, target: u64, abort: &AtomicBool) -> Result<(), Aborted> {
        if self.get() >= target {
            return Ok(());
        }
        for i in 0..256 {
            if self.get() >= target {
                return Ok(());
            }
            if i < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        loop {
            if abort.load(Ordering::Relaxed) {
                return Err(Aborted);
            }
            let g = self.m.lock().unwrap();
            if self.get() >= target {
                return Ok(());
            }
            let _ = self.cv.wait_timeout(g, Duration::from_millis(2)).unwrap();
            if self.get() >= target {
                return Ok(());
            }
        }
    }
}
