package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

// setCaches plays the node agent's report of the node's parent caches.
func (h *harness) setCaches(node string, caches ...sealv1.ParentCacheStatus) {
	h.t.Helper()
	var sn sealv1.SealerNode
	if err := h.c.Get(context.Background(), client.ObjectKey{Name: node}, &sn); err != nil {
		h.t.Fatal(err)
	}
	sn.Status.ParentCaches = caches
	if err := h.c.Status().Update(context.Background(), &sn); err != nil {
		h.t.Fatal(err)
	}
}

// TestParentCacheBuiltOnceThenRead: a batch waits, with the reason, for its graph's parent
// cache on the node; the operator starts one builder pod there; once the agent reports the
// cache verified the batch is placed and its sealer mounts the cache read-only, and the
// finished builder goes. A sealer that finds the cache corrupt (exit 6) gets it rebuilt, and
// its next attempt waits for the rebuild.
func TestParentCacheBuiltOnceThenRead(t *testing.T) {
	h := newHarnessWith(t, func(h *harness) { h.cacheNS = "cache-builders" })
	h.namespace("cache-builders")
	ns := h.namespace("cache")
	h.addNode("n1", 1, 8, nil)
	h.setCaches("n1")
	h.newBatch(ns, "b1", 4, nil)
	const proof = "StackedDrg8MiBV1_1"
	builder := render.ParentCacheBuilderName("n1", proof)
	reason := func(want string) {
		h.t.Helper()
		h.eventually("reason "+want, func() (bool, string) {
			c := meta.FindStatusCondition(h.batch(ns, "b1").Status.Conditions, sealv1.CondPlaced)
			return c != nil && strings.Contains(c.Message, want), fmt.Sprintf("%+v", c)
		})
	}
	reason("parent cache for " + proof + " not built yet: building")
	p := h.waitPod("cache-builders", builder)
	if render.PodNode(p) != "n1" || !strings.Contains(strings.Join(p.Spec.Containers[0].Command, " "), "parent-cache --proof "+proof) {
		t.Fatalf("builder pod %+v", p.Spec)
	}
	h.setCaches("n1", sealv1.ParentCacheStatus{Proof: proof, Building: true, Percent: 41})
	reason("parent cache for " + proof + " building: 41%")

	h.setPod(p, corev1.PodSucceeded, 0, "")
	h.setCaches("n1", sealv1.ParentCacheStatus{Proof: proof, Verified: true, Bytes: 3584})
	h.waitPhase(ns, "b1", sealv1.PhasePlaced)
	pod := h.waitPod(ns, "b1-sealer-1")
	var ro bool
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		ro = ro || (m.MountPath == render.ParentCacheMount && m.ReadOnly)
	}
	if !ro {
		t.Errorf("sealer pod does not read the node's cache read-only: %+v", pod.Spec.Containers[0].VolumeMounts)
	}
	h.eventually("finished builder removed", func() (bool, string) {
		h.reapPods("cache-builders")
		return h.pod("cache-builders", builder) == nil, "still there"
	})

	// The sealer found the cache corrupt: a rebuild, and attempt 2 waits for it.
	h.setPod(pod, corev1.PodFailed, 6, "parent cache: parent cache /parent-cache/x.cache is corrupt")
	rebuild := h.waitPod("cache-builders", builder)
	h.eventually("attempt 2 waits for the rebuild", func() (bool, string) {
		b := h.batch(ns, "b1")
		return strings.Contains(b.Status.Message, "attempt 2 waits: parent cache for "+proof+" on n1 is being rebuilt"), b.Status.Message
	})
	if h.pod(ns, "b1-sealer-2") != nil {
		t.Fatal("attempt 2 started before the rebuild")
	}
	h.setPod(rebuild, corev1.PodSucceeded, 0, "")
	h.waitPod(ns, "b1-sealer-2")
}
