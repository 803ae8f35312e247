//! Library side of the `sealer` binary: the `plan` dry run and, for tests, the benchmark and
//! the demo's checks only, the rust-fil-proofs oracle. (The proofs after PC2 are
//! `sealer-proofs`.)

#![warn(missing_docs)]

pub mod bench;
pub mod bench_gpu;
pub mod bench_peer;
pub mod bench_synth;
pub mod oracle;
pub mod plan;
