//! Library side of the `sealer` binary: SyntheticPoRep proofs and C1 after PC2 (filecoin-proofs'
//! own code on the sealer's outputs, configured by [`proofs`]), the `plan` dry run, and, for
//! tests, the benchmark and the demo's checks only, the rust-fil-proofs oracle.

#![warn(missing_docs)]

pub mod bench;
pub mod c1;
pub mod oracle;
pub mod plan;
pub mod proofs;
pub mod synth;
