//! Library side of the `sealer` binary: the `plan` dry run. (The benchmarks are
//! `sealer-bench`, the rust-fil-proofs oracle `sealer-oracle`, the proofs after PC2
//! `sealer-proofs`.)

#![warn(missing_docs)]

pub mod plan;
