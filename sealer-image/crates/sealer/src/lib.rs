//! Library side of the `sealer` binary: the rust-fil-proofs oracle/baseline, the benchmark, and
//! SyntheticPoRep proofs after PC2 (filecoin-proofs' own generator on the sealer's outputs).

#![warn(missing_docs)]

pub mod bench;
pub mod oracle;
pub mod plan;
pub mod synth;
