//! The proofs made after PC2 on the sealer's outputs: each NI-PoRep sector's C1 output and
//! V1_1 C1 from the labels in the slot once the seeds are known, by filecoin-proofs' own code
//! ([`c1`]); SyntheticPoRep's vanilla proofs file by a streaming writer that writes the bytes
//! filecoin-proofs would ([`synth`]); and the filecoin-proofs PoRepConfig of what a batch
//! seals ([`porep`]). Below PC1 and PC2: it reads their outputs (the slot through
//! `sealer-slot`, the files by [`sealer_config::sector_paths`]) and uses PC2's tree layout and
//! Poseidon helpers, never its engine.

#![warn(missing_docs)]

pub mod audit;
pub mod c1;
pub mod porep;
pub mod synth;
