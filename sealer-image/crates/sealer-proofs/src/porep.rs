//! filecoin-proofs' configuration for what a batch seals, shared by the proofs after PC2 (C1,
//! synthetic proofs) and by the rust-fil-proofs oracle.

use anyhow::Context;
use filecoin_proofs::PoRepConfig;
use sealer_config::{ApiVersion, BatchConfig, Feature, RegisteredProof};
use storage_proofs_core::api_version::{ApiFeature, ApiVersion as SpApi};

/// The filecoin-proofs PoRepConfig of a batch (size, porep id, API version, features).
pub fn porep_config(cfg: &BatchConfig) -> anyhow::Result<PoRepConfig> {
    porep_config_of(cfg.sector_size, cfg.porep_id, cfg.api_version, &cfg.features)
}

/// The filecoin-proofs PoRepConfig of a registered proof.
pub fn proof_config(p: &RegisteredProof) -> anyhow::Result<PoRepConfig> {
    porep_config_of(p.sector_size, sealer_config::porep_id_for(p.proof_id), p.api_version, &p.features)
}

fn porep_config_of(
    sector_size: u64,
    porep_id: [u8; 32],
    api_version: ApiVersion,
    features: &[Feature],
) -> anyhow::Result<PoRepConfig> {
    let api = match api_version {
        ApiVersion::V1_0_0 => SpApi::V1_0_0,
        ApiVersion::V1_1_0 => SpApi::V1_1_0,
        ApiVersion::V1_2_0 => SpApi::V1_2_0,
    };
    let feats = features
        .iter()
        .map(|f| match f {
            Feature::SyntheticPoRep => ApiFeature::SyntheticPoRep,
            Feature::NonInteractivePoRep => ApiFeature::NonInteractivePoRep,
        })
        .collect();
    PoRepConfig::new_groth16_with_features(sector_size, porep_id, api, feats).context("PoRepConfig")
}
