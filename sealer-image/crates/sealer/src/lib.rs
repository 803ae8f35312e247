//! Library side of the `sealer` binary: the rust-fil-proofs oracle/baseline, the benchmark, and
//! SyntheticPoRep proofs and NI-PoRep C1 after PC2 (filecoin-proofs' own code on the sealer's
//! outputs), and the `plan` dry run.

#![warn(missing_docs)]

pub mod bench;
pub mod c1;
pub mod oracle;
pub mod plan;
pub mod synth;
