package controllers

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// explainWriters bounds the parallel writes of unschedulable reasons.
const explainWriters = 8

// explainer writes why pending batches fit nowhere, off the scheduling cycle: a burst of
// hundreds of explanations must not delay the next cycle's placements. Only the latest
// explanation of each batch is kept; a batch placed in the meantime is left alone (the write
// is guarded on the batch's fresh status).
type explainer struct {
	c    client.Client
	rec  Recorder
	wake chan struct{}

	mu     sync.Mutex
	latest map[types.NamespacedName]string
}

// set replaces the explanations to write with those of the latest cycle.
func (e *explainer) set(m map[types.NamespacedName]string) {
	e.mu.Lock()
	e.latest = m
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *explainer) take() map[types.NamespacedName]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.latest
	e.latest = nil
	return m
}

// NeedLeaderElection: only the leader writes.
func (e *explainer) NeedLeaderElection() bool { return true }

// Start writes explanations until the manager stops.
func (e *explainer) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.wake:
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(explainWriters)
		for key, why := range e.take() {
			g.Go(func() error {
				var b sealv1.SealBatch
				if err := e.c.Get(gctx, key, &b); err != nil {
					return nil // gone: nothing to explain
				}
				if err := markUnschedulable(gctx, e.c, e.rec, &b, why); err != nil && client.IgnoreNotFound(err) != nil {
					log.FromContext(ctx).V(1).Info("writing unschedulable reason", "batch", key, "error", err.Error())
				}
				return nil
			})
		}
		_ = g.Wait()
	}
}
