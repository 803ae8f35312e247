//! Where the synthetic proofs read a sector's labels: the slot (through `sealer-slot`'s reader,
//! as C1 does) or layer files in its cache directory (what filecoin-proofs reads).

use rayon::prelude::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::shape::NODE;

/// Every layer's label of some nodes of one sector.
pub trait Labels {
    /// The columns of `nodes` (sorted, distinct): `layers × 32` bytes per node, layer 1 first,
    /// in the order of `nodes`.
    fn columns(&mut self, nodes: &[u64]) -> anyhow::Result<Vec<u8>>;
}

/// A sector's layer files (`sc-02-data-layer-<l>.dat`), read in parallel.
pub struct LayerFiles {
    files: Vec<File>,
}

impl LayerFiles {
    /// Open the layer files of `cache`; None when the first is not there.
    pub fn open(cache: &Path, layers: usize) -> anyhow::Result<Option<Self>> {
        let paths = super::layer_paths(cache, layers);
        if !paths[0].exists() {
            return Ok(None);
        }
        let files = paths
            .iter()
            .map(|p| File::open(p).map_err(|e| anyhow::anyhow!("opening {}: {e}", p.display())))
            .collect::<anyhow::Result<_>>()?;
        Ok(Some(LayerFiles { files }))
    }
}

impl Labels for LayerFiles {
    fn columns(&mut self, nodes: &[u64]) -> anyhow::Result<Vec<u8>> {
        let width = self.files.len() * NODE;
        let mut out = vec![0u8; nodes.len() * width];
        out.par_chunks_mut(width).zip(nodes).try_for_each(|(col, &v)| {
            self.files
                .iter()
                .zip(col.chunks_mut(NODE))
                .try_for_each(|(f, label)| f.read_exact_at(label, v * NODE as u64))
        })?;
        Ok(out)
    }
}

/// One sector of a batch's slot: each page holding a needed node is read once per call, for
/// every layer, in one io_uring submission per 256 pages.
pub struct SlotLabels<'a> {
    reader: &'a mut sealer_slot::LayerReader,
    sector: usize,
    layers: usize,
}

impl<'a> SlotLabels<'a> {
    /// The labels of the batch's `sector`-th sector.
    pub fn new(reader: &'a mut sealer_slot::LayerReader, sector: usize, layers: usize) -> Self {
        SlotLabels { reader, sector, layers }
    }
}

impl Labels for SlotLabels<'_> {
    fn columns(&mut self, nodes: &[u64]) -> anyhow::Result<Vec<u8>> {
        const BATCH: usize = 256;
        let g = *self.reader.geometry();
        let width = self.layers * NODE;
        let mut out = vec![0u8; nodes.len() * width];
        let mut pages: Vec<u64> = nodes.iter().map(|v| v / g.npp).collect();
        pages.dedup(); // sorted nodes: their pages are sorted too
        let mut buf = sealer_storage::AlignedBuf::new(BATCH * sealer_storage::PAGE);
        for layer in 1..=self.layers {
            let mut next = 0; // first node not yet copied
            for batch in pages.chunks(BATCH) {
                self.reader.read_page_list(layer as u32, batch, &mut buf).map_err(|e| anyhow::anyhow!("{e}"))?;
                let data = buf.as_slice();
                for (i, &p) in batch.iter().enumerate() {
                    while next < nodes.len() && nodes[next] / g.npp == p {
                        let v = nodes[next];
                        let off = i * sealer_storage::PAGE + (v % g.npp) as usize * g.row + self.sector * NODE;
                        let at = next * width + (layer - 1) * NODE;
                        out[at..at + NODE].copy_from_slice(&data[off..off + NODE]);
                        next += 1;
                    }
                }
            }
        }
        Ok(out)
    }
}
