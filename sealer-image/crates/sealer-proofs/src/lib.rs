//! The proofs made after PC2, with filecoin-proofs' own code on the sealer's outputs: each
//! NI-PoRep sector's C1 output, V1_1 C1 from the labels in the slot once the seeds are known
//! ([`c1`]), SyntheticPoRep's vanilla proofs ([`synth`]), and the filecoin-proofs PoRepConfig
//! of what a batch seals ([`porep`]). Below PC1 and PC2: it reads their outputs (the slot
//! through `sealer-slot`, the files by [`sealer_config::sector_paths`]), never their code.

#![warn(missing_docs)]

pub mod c1;
pub mod porep;
pub mod synth;
