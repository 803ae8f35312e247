//! The sectors a PC2 run gives up on its way: a failure of one sector's own files (reading its
//! data, writing its replica or trees, its comm_d no longer matching) ends that sector, and
//! the others go on; only a failure of every sector, or of what they share (the slot, the
//! device), fails the batch.

use sealer_data::SectorFailure;
use sealer_error::SealerError;

/// Per sector of the batch (by index), the failure that ended it, if one did.
pub(crate) struct Losses {
    ids: Vec<u64>,
    lost: Vec<Option<SectorFailure>>,
}

impl Losses {
    /// None lost yet, for the sectors numbered `ids` in batch order.
    pub(crate) fn new(ids: Vec<u64>) -> Self {
        let lost = vec![None; ids.len()];
        Losses { ids, lost }
    }

    /// Whether sector index `s` was given up.
    pub(crate) fn is_lost(&self, s: usize) -> bool {
        self.lost[s].is_some()
    }

    /// Give sector index `s` up: `class` is the sealer's exit name for the problem and
    /// `reason` says what failed (the sector's number is put in front). The first reason stays.
    pub(crate) fn give_up(&mut self, s: usize, class: &'static str, reason: impl std::fmt::Display) {
        if self.lost[s].is_some() {
            return;
        }
        let f = SectorFailure::new(self.ids[s], class, reason);
        log::warn!("PC2 goes on without sector {} ({class}): {}", f.sector_id, f.reason);
        self.lost[s] = Some(f);
    }

    /// Give sector index `s` up for an I/O error while `what`.
    pub(crate) fn io(&mut self, s: usize, what: &str, e: impl std::fmt::Display) {
        self.give_up(s, "io", format!("PC2 failed {what}: {e}"));
    }

    /// Nothing is left to seal: the error that fails the batch, every sector's reason in it.
    pub(crate) fn all_lost(&self) -> Option<SealerError> {
        if self.lost.iter().any(Option::is_none) {
            return None;
        }
        Some(sealer_data::all_failed("every sector of the batch failed in PC2", &self.failures()))
    }

    /// The failures, in batch order.
    pub(crate) fn failures(&self) -> Vec<SectorFailure> {
        self.lost.iter().flatten().cloned().collect()
    }

    /// The failures as a checkpoint keeps them.
    pub(crate) fn to_records(&self) -> Vec<crate::checkpoint::LostSector> {
        self.failures()
            .into_iter()
            .map(|f| crate::checkpoint::LostSector { sector_id: f.sector_id, class: f.class.into(), reason: f.reason })
            .collect()
    }

    /// Sectors a checkpoint recorded as given up stay given up in the resumed run.
    pub(crate) fn restore(&mut self, records: &[crate::checkpoint::LostSector]) {
        for r in records {
            if let Some(s) = self.ids.iter().position(|id| *id == r.sector_id) {
                let class = SectorFailure::class_named(&r.class).unwrap_or("io");
                self.lost[s] = Some(SectorFailure { sector_id: r.sector_id, class, reason: r.reason.clone() });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_fails_only_when_every_sector_is_lost() {
        let mut l = Losses::new(vec![7, 8]);
        l.io(1, "writing its replica", "No space left on device");
        l.give_up(1, "input", "a later reason is not kept");
        assert!(l.is_lost(1) && !l.is_lost(0));
        assert!(l.all_lost().is_none());
        assert_eq!(l.failures()[0].reason, "sector 8: PC2 failed writing its replica: No space left on device");
        l.give_up(0, "data-mismatch", "its data changed");
        let e = l.all_lost().expect("every sector lost");
        assert!(matches!(e, SealerError::DataMismatch(_)), "{e:?}");
        let mut back = Losses::new(vec![7, 8]);
        back.restore(&l.to_records());
        assert_eq!(back.failures(), l.failures());
    }
}
