//! A batch's slot as PC1 leaves it, without running PC1: random labels (each node a field
//! element) in every layer, placed through the batch's stripe over its layer files, and the
//! state file PC1 writes after its last layer, so PC2 and the readers run as after PC1.

use rayon::prelude::*;
use sealer_config::{porep_id_for, ApiVersion, BatchConfig};
use sealer_storage::{AlignedBuf, Devices, PageBackend, UringBackend, PAGE};
use std::path::Path;

/// Where a bench's slot lies: how many layer files, and the slot's start in each.
#[derive(Clone, Copy, Debug)]
pub struct SlotPlace {
    /// Layer files the slot stripes over.
    pub files: usize,
    /// The slot's start in every file, in 4 KiB pages.
    pub offset_pages: u64,
}

impl Default for SlotPlace {
    fn default() -> Self {
        SlotPlace { files: 2, offset_pages: 0 }
    }
}

/// 32 pseudo-random bytes from `seed` (a linear congruential step per byte), advancing it.
pub fn rand32(seed: &mut u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    for b in out.iter_mut() {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *b = (*seed >> 33) as u8;
    }
    out
}

/// A random CC batch config for the benches and tests: `n` sectors of `sector_size` under
/// proof `proof_id`, its slot over two files in `layer_dir` (`layers-a.img`, `layers-b.img`).
pub fn random_config(
    sector_size: u64,
    proof_id: u64,
    api: ApiVersion,
    n: usize,
    seed: u64,
    layer_dir: &Path,
    out: &Path,
) -> BatchConfig {
    random_config_in(sector_size, proof_id, api, n, seed, layer_dir, out, SlotPlace::default())
}

/// [`random_config`] with the slot at `place`: `place.files` files in `layer_dir`.
#[allow(clippy::too_many_arguments)]
pub fn random_config_in(
    sector_size: u64,
    proof_id: u64,
    api: ApiVersion,
    n: usize,
    seed: u64,
    layer_dir: &Path,
    out: &Path,
    place: SlotPlace,
) -> BatchConfig {
    let mut s = seed;
    let sectors: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "prover_id": hex::encode(rand32(&mut s)),
                "sector_id": 1000 + i as u64 + (seed % 1000) * 1000,
                "ticket": hex::encode(rand32(&mut s)),
            })
        })
        .collect();
    let features: Vec<&str> = if proof_id >= 10 { vec!["SyntheticPoRep"] } else { vec![] };
    // layers-a.img, layers-b.img, … as the two-file layout has always been named.
    let name = |i: usize| match place.files {
        ..=26 => format!("layers-{}.img", (b'a' + i as u8) as char),
        _ => format!("layers-{i}.img"),
    };
    let paths: Vec<String> = (0..place.files).map(|i| layer_dir.join(name(i)).display().to_string()).collect();
    let v = serde_json::json!({
        "sector_size": sector_size,
        "porep_id": hex::encode(porep_id_for(proof_id)),
        "api_version": api.as_str(),
        "features": features,
        "sectors": sectors,
        "layers": {"paths": paths, "slot_offset": place.offset_pages},
        "output_dir": out.display().to_string(),
    });
    BatchConfig::from_json(&v.to_string()).expect("valid bench config")
}

/// The proof id (filecoin-proofs' registered proof, V1_1) of a sector size.
pub fn proof_id_of(sector_size: u64) -> Result<u64, String> {
    let i = sealer_config::SECTOR_SIZES
        .iter()
        .position(|s| s.0 == sector_size)
        .ok_or_else(|| format!("sector size {sector_size}: not a Filecoin sector size"))?;
    Ok(5 + i as u64)
}

/// Random labels (each node below the field modulus) in every layer of `cfg`'s slot, written
/// through its stripe in large requests, and the state file PC1 writes after its last layer.
pub fn fill_random_layers(cfg: &BatchConfig) -> Result<(), String> {
    let io = |e: std::io::Error| format!("random layers: {e}");
    let layers = cfg.num_layers();
    let g = sealer_slot::geometry(cfg, sealer_slot::Tuning::default());
    let stripe = sealer_slot::stripe(cfg, &g);
    let devs = Devices::open(&cfg.layers.paths, stripe.bytes_per_device(layers)).map_err(io)?;
    let mut be = UringBackend::new(devs, 16).map_err(io)?;
    const CHUNK_PAGES: u64 = 4096; // 16 MiB per batch of requests
    let mut buf = AlignedBuf::new(CHUNK_PAGES as usize * PAGE);
    let mut digests = Vec::new();
    for layer in 1..=layers as u32 {
        for p0 in (0..g.ppl).step_by(CHUNK_PAGES as usize) {
            let count = CHUNK_PAGES.min(g.ppl - p0);
            buf.as_mut_slice().par_chunks_mut(PAGE).enumerate().for_each(|(i, page)| {
                // splitmix64 from the page's number: distinct, repeatable pseudo-random labels.
                let mut x = (layer as u64) << 40 | (p0 + i as u64);
                for w in page.chunks_mut(8) {
                    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = x;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    w.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
                }
                page.chunks_mut(32).for_each(|node| node[31] &= 0x3f);
            });
            let ext = sealer_storage::plan_range(
                &stripe,
                layer,
                p0,
                count as usize,
                buf.as_mut_ptr(),
                sealer_storage::DEFAULT_REQUEST_BYTES,
            );
            be.write_extents(&ext).map_err(io)?;
        }
        be.flush().map_err(io)?;
        digests.push(sealer_slot::layer_digest(&g, stripe, &mut be, layer).map_err(|e| e.to_string())?);
    }
    let (rids, _) = sealer_slot::sector_ids(cfg);
    std::fs::create_dir_all(&cfg.output_dir).map_err(io)?;
    let st = sealer_slot::state::State {
        batch_key: sealer_slot::state::batch_key(cfg, &rids),
        layers,
        layers_done: layers,
        layer_digests: digests,
    };
    sealer_slot::state::store(&sealer_slot::state_path(cfg), &st).map_err(io)
}

/// The batch `bench pc2` seals in `dir` (the same for a given size and count, so that
/// filecoin-proofs' CPU run and the GPU peer seal the same first sector), with filecoin-proofs'
/// parent cache pointed into `dir`.
pub fn pc2_bench_config(sector_size: u64, n: usize, dir: &Path) -> Result<BatchConfig, String> {
    let size_idx =
        sealer_config::SECTOR_SIZES.iter().position(|s| s.0 == sector_size).ok_or("unsupported sector size")?;
    let proof_id = 5 + size_idx as u64;
    sealer_oracle::set_cache_env(&dir.join("fil-cache"));
    let out = dir.join(format!("pc2-sealer-n{n}"));
    Ok(random_config(sector_size, proof_id, ApiVersion::V1_1_0, n, 77, &dir.join("pc2-sealer-layers"), &out))
}
