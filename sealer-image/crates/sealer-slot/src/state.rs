//! The restart state file: which layers of which batch are complete.
//!
//! Written atomically (temp file, fsync, rename, fsync of the directory) after each layer
//! has been written and flushed, so a crash never records a layer that is not on storage.
//! The file lives in the output directory, which can outlive the layer slot (a slot is
//! scrubbed on release, or reused by another batch), so each layer also records a digest of
//! sampled pages as stored; a resume trusts only the layers whose pages still match.

use sealer_config::BatchConfig;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Contents of `pc1-state.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    /// Identity of the batch (inputs and storage placement), hex.
    pub batch_key: String,
    /// Layers of the batch.
    pub layers: usize,
    /// Layers completely written (1..=layers_done are valid).
    pub layers_done: usize,
    /// Per completed layer (index 0 = layer 1), [`crate::layer_digest`] of its stored pages.
    /// Missing in files of older sealers: their layers are then not trusted.
    #[serde(default)]
    pub layer_digests: Vec<String>,
}

/// A key that changes whenever the labels or their placement would change.
pub fn batch_key(cfg: &BatchConfig, replica_ids: &[[u8; 32]]) -> String {
    use sha2_lite::Hasher;
    let mut h = Hasher::new();
    h.update(&cfg.sector_size.to_le_bytes());
    h.update(&cfg.porep_id);
    h.update(cfg.api_version.as_str().as_bytes());
    for r in replica_ids {
        h.update(r);
    }
    for p in &cfg.layers.paths {
        h.update(p.display().to_string().as_bytes());
        h.update(&[0]);
    }
    h.update(&cfg.layers.slot_offset.to_le_bytes());
    hex::encode(h.finish())
}

/// Load the state file; `None` when missing or unreadable.
pub fn load(path: &Path) -> Option<State> {
    let s = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&s).ok()
}

/// Store the state atomically and durably (synced, renamed, its directory synced).
pub fn store(path: &Path, st: &State) -> std::io::Result<()> {
    sealer_storage::durable::replace(path, serde_json::to_string_pretty(st).unwrap().as_bytes())
}

/// SHA-256 via the label hasher's dependency, without pulling another crate.
mod sha2_lite {
    pub struct Hasher(Vec<u8>);
    impl Hasher {
        pub fn new() -> Self {
            Hasher(Vec::new())
        }
        pub fn update(&mut self, b: &[u8]) {
            self.0.extend_from_slice(b);
        }
        pub fn finish(self) -> [u8; 32] {
            sealer_hash::sha256(&self.0)
        }
    }
}
