//! Library side of the `sealer` binary: the rust-fil-proofs oracle/baseline and the benchmark.

#![warn(missing_docs)]

pub mod bench;
pub mod oracle;
