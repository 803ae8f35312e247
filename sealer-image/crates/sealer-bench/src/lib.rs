//! The sealer's benchmarks (`sealer bench …`), one module per bench, each set against its peer
//! in the same run: [`pc1`] (the SHA bound and rust-fil-proofs), [`pc2`] (filecoin-proofs'
//! PC2, and its GPU path through [`fil_gpu_peer`]), [`gpu_kernels`] (the Poseidon kernels
//! alone), [`synth`] (filecoin-proofs' synthetic proofs), [`pc2_io`] (fio on the same files).
//! [`slot`] lays out a batch's slot as PC1 leaves it; [`fio`] runs the storage peer.

#![warn(missing_docs)]

pub mod fil_gpu_peer;
pub mod fio;
pub mod gpu_kernels;
pub mod pc1;
pub mod pc2;
pub mod pc2_io;
pub mod slot;
pub mod synth;

/// CPU seconds (user + system) of this process so far, every thread included (io_uring's
/// workers too).
pub fn cpu_now() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF)
}

/// CPU seconds (user + system) of this process' waited-for children so far.
pub fn children_cpu_now() -> f64 {
    rusage_seconds(libc::RUSAGE_CHILDREN)
}

fn rusage_seconds(who: libc::c_int) -> f64 {
    // SAFETY: libc::rusage is plain integers, so all-zero is a valid value; getrusage only writes
    // into the local `ru` through a pointer that is valid for the call (on failure `ru` stays zero).
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        t(ru.ru_utime) + t(ru.ru_stime)
    }
}
