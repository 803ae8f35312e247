//! The copy probe: how fast host memory reaches the device along each path the engine could
//! take (page-locked memory from its mapped base or from inside it, a host buffer object copied
//! by the device, ordinary memory), on one queue and on two. The prepared GPU run records it
//! beside the PCIe link, to tell the engine's copies from the bus's limit.

use crate::{seconds, Gpu, GpuError, Pinned};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::event::Event;
use opencl3::memory::Buffer;
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING};
use std::time::Instant;

/// Where a probed copy reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyPath {
    /// Page-locked memory ([`Gpu::pinned`]), from the mapping's first byte.
    PinnedBase,
    /// The same memory from an offset inside it (a page and 64 bytes in), as PC2's layer
    /// slices are.
    PinnedOffset,
    /// The page-locked buffer object itself, copied by the device (`clEnqueueCopyBuffer`).
    HostBufferObject,
    /// Ordinary (pageable) memory: the driver stages it.
    Ordinary,
}

/// One probed path.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CopyRate {
    /// Where the copy read from.
    pub path: CopyPath,
    /// Queues the bytes were split across (each its half, at once).
    pub queues: usize,
    /// Bytes copied.
    pub bytes: u64,
    /// Wall seconds from the first enqueue to the last copy finished.
    pub seconds: f64,
    /// Seconds by the device's clock, summed over the copies.
    pub device_seconds: f64,
    /// `bytes / seconds`, GB/s (10^9 bytes).
    pub gb_per_s: f64,
}

impl Gpu {
    /// Copy `bytes` to the device along every [`CopyPath`], on one queue and on two, after a
    /// warm-up copy each; checks that the bytes arrived (first and last 64 of them).
    pub fn copy_probe(&self, bytes: usize) -> Result<Vec<CopyRate>, GpuError> {
        const INSIDE: usize = 4096 + 64;
        let bytes = bytes.max(1 << 20) & !63;
        let queues: Vec<CommandQueue> = (0..2)
            .map(|_| CommandQueue::create_default(&self.context, CL_QUEUE_PROFILING_ENABLE))
            .collect::<Result<_, _>>()
            .map_err(|e| self.call("creating a queue", e))?;
        let mut pinned: Pinned = self.pinned(bytes + INSIDE)?;
        for (i, b) in pinned.as_mut_slice().iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let ordinary: Vec<u8> = pinned.as_slice()[..bytes].to_vec();
        let mut device = self.buffer(bytes)?;
        let mut out = Vec::new();
        for path in [CopyPath::PinnedBase, CopyPath::PinnedOffset, CopyPath::HostBufferObject, CopyPath::Ordinary] {
            let (src, src_offset): (&[u8], usize) = match path {
                CopyPath::PinnedBase | CopyPath::HostBufferObject => (&pinned.as_slice()[..bytes], 0),
                CopyPath::PinnedOffset => (&pinned.as_slice()[INSIDE..INSIDE + bytes], INSIDE),
                CopyPath::Ordinary => (&ordinary, 0),
            };
            for n in [1usize, 2] {
                let run = |device: &mut Buffer<u8>| -> Result<(f64, Vec<Event>), GpuError> {
                    let half = bytes / n;
                    let t = Instant::now();
                    let mut evs = Vec::new();
                    for (q, queue) in queues.iter().take(n).enumerate() {
                        let (at, len) = (q * half, if q + 1 == n { bytes - q * half } else { half });
                        let ev = match path {
                            CopyPath::HostBufferObject => unsafe {
                                queue.enqueue_copy_buffer(&pinned.buffer, device, src_offset + at, at, len, &[])
                            },
                            _ => unsafe {
                                queue.enqueue_write_buffer(device, CL_NON_BLOCKING, at, &src[at..at + len], &[])
                            },
                        }
                        .map_err(|e| self.call("copying to the device (probe)", e))?;
                        queue.flush().map_err(|e| self.call("starting a probe copy", e))?;
                        evs.push(ev);
                    }
                    for queue in queues.iter().take(n) {
                        queue.finish().map_err(|e| self.call("finishing a probe copy", e))?;
                    }
                    Ok((t.elapsed().as_secs_f64(), evs))
                };
                run(&mut device)?; // warm-up: first touch of the pages and the driver's paths
                let (wall, evs) = run(&mut device)?;
                for at in [0, bytes - 64] {
                    let mut got = [0u8; 64];
                    unsafe { queues[0].enqueue_read_buffer(&device, CL_BLOCKING, at, &mut got, &[]) }
                        .map_err(|e| self.call("reading the probe back", e))?;
                    if got[..] != src[at..at + 64] {
                        return Err(
                            self.call("the copy probe", format!("{path:?} on {n} queues copied wrong bytes at {at}"))
                        );
                    }
                }
                out.push(CopyRate {
                    path,
                    queues: n,
                    bytes: bytes as u64,
                    seconds: wall,
                    device_seconds: evs.iter().map(seconds).sum(),
                    gb_per_s: bytes as f64 / wall.max(1e-9) / 1e9,
                });
            }
        }
        Ok(out)
    }
}
