//! PC2's output writes without the hashing: every sector's replica, tree-c and tree-r-last
//! written through the same builders, in the same order and requests as the GPU engine writes a
//! hashed range, through the writer threads (`sealer bench pc2-io` times them against fio's
//! sequential write).

use crate::engine::put_levels;
use crate::writer::OutputFile;
use crate::{base_tree_count, rows_to_discard, tree_name, TreeBuilder};
use sealer_gpu::NODE;
use std::path::Path;

/// What [`write_as_pc2`] wrote.
#[derive(Clone, Copy, Debug, Default)]
pub struct Written {
    /// Bytes in the files.
    pub bytes: u64,
    /// Files written (each synced once, when complete).
    pub files: usize,
}

/// Write `sectors` sectors' PC2 outputs of a `sector_size` sector under `dir/<s>/` (replica,
/// every base tree's tree-c and tree-r-last; the contents are placeholder field elements),
/// `range` nodes at a time, as PC2's GPU engine writes them: the replica's nodes of the range,
/// then each tree's levels the range holds, then the levels above it through the builder.
pub fn write_as_pc2(dir: &Path, sector_size: u64, sectors: usize, range: u64) -> std::io::Result<Written> {
    let nodes = sector_size / NODE as u64;
    let t = base_tree_count(sector_size);
    let leaves = nodes / t as u64;
    let range = range.min(leaves);
    assert!(range.is_power_of_two() && leaves.is_multiple_of(range), "a range divides a base tree");
    let rtd = rows_to_discard(leaves);
    // The levels a range holds: count / 8^j nodes a sector, while whole.
    let mut levels: Vec<Vec<u8>> = Vec::new();
    let mut per = range as usize;
    loop {
        let mut l = vec![0u8; sectors * per * NODE];
        // Any canonical field element: the top level goes through the builder's hashing.
        for (i, node) in l.chunks_mut(NODE).enumerate() {
            node[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
        }
        levels.push(l);
        if per < 8 || !per.is_multiple_of(8) {
            break;
        }
        per /= 8;
    }
    let mut written = Written::default();
    let mut replicas = Vec::new();
    for s in 0..sectors {
        let d = dir.join(s.to_string());
        std::fs::create_dir_all(&d)?;
        replicas.push(OutputFile::create(&d.join("sealed"), nodes * NODE as u64)?);
    }
    for k in 0..t {
        let mut trees: Vec<(TreeBuilder, TreeBuilder)> = (0..sectors)
            .map(|s| {
                let d = dir.join(s.to_string());
                Ok((
                    TreeBuilder::new(&d.join(tree_name("tree-c", k, t)), leaves, 0)?,
                    TreeBuilder::new(&d.join(tree_name("tree-r-last", k, t)), leaves, rtd + 1)?,
                ))
            })
            .collect::<std::io::Result<_>>()?;
        for v in (k as u64 * leaves..(k as u64 + 1) * leaves).step_by(range as usize) {
            let per = range as usize * NODE;
            for (s, (tc, tr)) in trees.iter_mut().enumerate() {
                replicas[s].write_at(&levels[0][s * per..(s + 1) * per], v * NODE as u64)?;
                put_levels(tc, |j| Some(levels[j].as_slice()), levels.len(), range as usize, s)?;
                put_levels(tr, |j| Some(levels[j].as_slice()), levels.len(), range as usize, s)?;
            }
        }
        for (tc, tr) in trees {
            written.bytes += tc.file_len + tr.file_len;
            tc.finish()?;
            tr.finish()?;
            written.files += 2;
        }
    }
    for r in replicas {
        r.sync_all()?;
        written.bytes += nodes * NODE as u64;
        written.files += 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_are_pc2s_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let w = write_as_pc2(dir.path(), 8 << 20, 2, 1 << 12).unwrap();
        // Per sector: the replica, tree-c whole, tree-r-last without its discarded rows.
        let per = crate::output_bytes_per_sector(8 << 20, 2, false) - 4096 - (2 * (1 << 18) - 1) * 32;
        assert_eq!((w.bytes, w.files), (2 * per, 6));
        let on_disk: u64 = (0..2)
            .flat_map(|s| std::fs::read_dir(dir.path().join(s.to_string())).unwrap())
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert_eq!(on_disk, w.bytes);
    }
}
