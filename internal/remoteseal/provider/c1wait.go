package provider

import (
	"context"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// c1Poll is how often a held commit1 call reads the batch again.
const c1Poll = time.Second

// awaitC1 holds a commit1 call while the sector's C1 output may still come: it re-reads the
// batch until the sector's state is settled (written, failed, abandoned, seed missing), the
// batch failed or completed, until passed, or the caller left. b is left at the last read.
func awaitC1(ctx context.Context, c client.Reader, b *sealv1.SealBatch, sector int64, until time.Time, now func() time.Time) error {
	for {
		switch sectorState(b, sector) {
		case "C1Written", "C1Failed", "SeedMissing", "Abandoned":
			return nil
		}
		if b.Status.Phase.Final() || slices.Contains(b.Spec.AbandonedSectors, sector) || !now().Before(until) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(c1Poll, until.Sub(now()))):
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
	}
}

// readerOr is fresh when set, else c.
func readerOr(fresh, c client.Reader) client.Reader {
	if fresh != nil {
		return fresh
	}
	return c
}

func sectorState(b *sealv1.SealBatch, sector int64) string {
	for _, s := range b.Status.Sectors {
		if s.Number == sector {
			return s.State
		}
	}
	return ""
}

// sectorReason is why the sector is C1Failed or Abandoned.
func sectorReason(b *sealv1.SealBatch, sector int64) string {
	for _, s := range b.Status.Sectors {
		if s.Number == sector {
			return s.Reason
		}
	}
	return ""
}
