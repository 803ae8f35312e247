package provider

import (
	"context"
	"fmt"
	"path"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/remoteseal/sectordata"
	"github.com/sealfleet/sealfleet/internal/render"
)

// NodeLocator hands out signed URLs on the node that holds a batch's outputs: the node
// agent's sector data server (SealerNode status.sectorDataURL), serving beneath the host
// path the remote-seal batches write to.
type NodeLocator struct {
	Client client.Client
	Signer sectordata.Signer
	// TTL is how long a URL stays valid (a download resumed later asks the provider again).
	TTL time.Duration
	Now func() time.Time
}

var _ DataLocator = (*NodeLocator)(nil)

// SectorPaths are a sector's replica and cache directory in a remote-seal batch's output,
// relative to the output root (the Lotus layout the batches write).
func SectorPaths(b *sealv1.SealBatch, sector int64) (sealed, cache string) {
	name := render.LotusSectorName(b.Spec.MinerID[2:], sector)
	return path.Join(b.Namespace, b.Name, "sealed", name), path.Join(b.Namespace, b.Name, "cache", name)
}

// url signs rel (relative to the output root) on the batch's node.
func (l *NodeLocator) url(ctx context.Context, b *sealv1.SealBatch, kind, rel string) (string, error) {
	if b.Status.Node == "" {
		return "", fmt.Errorf("batch %s/%s has no node", b.Namespace, b.Name)
	}
	var sn sealv1.SealerNode
	if err := l.Client.Get(ctx, client.ObjectKey{Name: b.Status.Node}, &sn); err != nil {
		return "", fmt.Errorf("node %s of batch %s/%s: %w", b.Status.Node, b.Namespace, b.Name, err)
	}
	if sn.Status.SectorDataURL == "" {
		return "", fmt.Errorf("node %s serves no sector data (its agent runs without --sector-data-bind-address)", b.Status.Node)
	}
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	return l.Signer.URL(sn.Status.SectorDataURL, kind, rel, now().Add(l.TTL))
}

// Sealed is the replica, sealed/s-t0<miner>-<n>.
func (l *NodeLocator) Sealed(ctx context.Context, b *sealv1.SealBatch, sector int64) (string, error) {
	sealed, _ := SectorPaths(b, sector)
	return l.url(ctx, b, sectordata.KindSealed, sealed)
}

// Cache is the sector's cache directory, served as a tar.
func (l *NodeLocator) Cache(ctx context.Context, b *sealv1.SealBatch, sector int64) (string, error) {
	_, cache := SectorPaths(b, sector)
	return l.url(ctx, b, sectordata.KindCache, cache)
}

// Commit1 is the C1 output the batch wrote into the sector's cache directory.
func (l *NodeLocator) Commit1(ctx context.Context, b *sealv1.SealBatch, sector int64) (string, error) {
	_, cache := SectorPaths(b, sector)
	return l.url(ctx, b, sectordata.KindCommit1, path.Join(cache, "commit-phase1-output"))
}

// UnsealedCC is a CC sector's unsealed file in lotus' format, made by the node from the
// replica's length (lotus' SectorReceive wants one).
func (l *NodeLocator) UnsealedCC(ctx context.Context, b *sealv1.SealBatch, sector int64) (string, error) {
	sealed, _ := SectorPaths(b, sector)
	return l.url(ctx, b, sectordata.KindUnsealedCC, sealed)
}
