package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

// TestSealerPodsRunInTheOperatorsNamespace: with --sealer-namespace a tenant's batch gets its
// sealer pod, ConfigMap and disruption budget in the operator's namespace (named apart from a
// same-named batch of another namespace, linked by labels), never in the tenant's; the batch
// runs and completes through them; a claim source it cannot reach fails it with the fix; its
// deletion removes what it left there.
func TestSealerPodsRunInTheOperatorsNamespace(t *testing.T) {
	h := newHarnessWith(t, func(h *harness) { h.sealerNS = "sealfleet-sealers" })
	ctx := context.Background()
	tenant, other := h.namespace("tenant-a"), h.namespace("tenant-b")
	h.addNode("node-h", 2, 8, nil)
	h.newBatch(tenant, "b", 2, nil)
	home := render.Home{Namespace: h.sealerNS}
	var got *sealv1.SealBatch
	h.eventually("placed with a pod", func() (bool, string) {
		got = h.batch(tenant, "b")
		return got.Status.PodName != "", got.Status.Message
	})
	b := got
	pod := h.waitPod(h.sealerNS, home.PodName(b, 1))
	if got.Status.PodNamespace != h.sealerNS || !strings.HasPrefix(pod.Name, "b-"+string(b.UID)[:8]) {
		t.Errorf("status names pod %s/%s; pod %s", got.Status.PodNamespace, got.Status.PodName, pod.Name)
	}
	// Linked to its batch by labels; managed (for kubectl drain) by its config ConfigMap.
	if ns, name, ok := render.BatchOf(pod); !ok || ns != tenant || name != "b" || len(pod.OwnerReferences) != 1 ||
		pod.OwnerReferences[0].Kind != "ConfigMap" || pod.OwnerReferences[0].Name != home.ConfigMapName(b) {
		t.Errorf("pod labels %v owners %v", pod.Labels, pod.OwnerReferences)
	}
	var pods corev1.PodList
	if err := h.c.List(ctx, &pods, client.InNamespace(tenant)); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods in the tenant's namespace: %d (%v)", len(pods.Items), err)
	}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.sealerNS, Name: home.ConfigMapName(b)}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("sealer config: %v", err)
	}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.sealerNS, Name: home.DisruptionBudgetName(b)}, &policyv1.PodDisruptionBudget{}); err != nil {
		t.Errorf("disruption budget: %v", err)
	}
	// A same-named batch of another namespace gets pods of its own.
	twin := h.newBatch(other, "b", 2, nil)
	h.eventually("the twin's pod", func() (bool, string) {
		tw := h.batch(other, "b")
		return tw.Status.PodName != "" && tw.Status.PodName != pod.Name, tw.Status.PodName + " " + tw.Status.Message
	})
	_ = twin

	// The pod's progress and end reach the batch through the labels.
	h.setPod(pod, corev1.PodRunning, 0, "")
	h.waitPhase(tenant, "b", sealv1.PhasePC1)
	h.setPod(pod, corev1.PodSucceeded, 0, results(b))
	// Released first: the slot is recorded dirty only then, and a scrub wait before it finds
	// nothing to scrub and leaves the slot dirty for good (the claim below would never place).
	h.eventually("completed and released", func() (bool, string) {
		got := h.batch(tenant, "b")
		r := condition(got, sealv1.CondReleased)
		return got.Status.Phase == sealv1.PhaseCompleted && r != nil && r.Status == "True", got.Status.Message
	})
	h.succeedScrubs("node-h")

	claim := h.newBatch(tenant, "claim", 1, func(b *sealv1.SealBatch) {
		b.Spec.Output = &sealv1.OutputSpec{PersistentVolumeClaim: &sealv1.PVCOutput{ClaimName: "outputs"}}
	})
	h.eventually("a tenant's claim refused", func() (bool, string) {
		c := h.batch(tenant, "claim")
		return c.Status.Phase == sealv1.PhaseFailed && strings.Contains(c.Status.Message, "spec.output.persistentVolumeClaim: sealer pods run in the operator's namespace sealfleet-sealers"), c.Status.Message
	})
	if f := condition(h.batch(tenant, "claim"), sealv1.CondFailed); f == nil || f.Reason != string(sealv1.ReasonInvalidSpec) {
		t.Errorf("Failed condition %+v", f)
	}
	if p := h.pod(h.sealerNS, home.PodName(claim, 1)); p != nil {
		t.Errorf("a pod was created for a batch that failed its spec: %s", p.Name)
	}

	if err := h.c.Delete(ctx, h.batch(tenant, "b")); err != nil {
		t.Fatal(err)
	}
	h.eventually("deleted, leftovers gone", func() (bool, string) {
		h.reapPods(h.sealerNS)
		if h.batch(tenant, "b") != nil {
			return false, "batch still there"
		}
		var left []string
		if p := h.pod(h.sealerNS, pod.Name); p != nil {
			left = append(left, "pod")
		}
		for name, obj := range map[string]client.Object{home.ConfigMapName(b): &corev1.ConfigMap{}, home.DisruptionBudgetName(b): &policyv1.PodDisruptionBudget{}} {
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.sealerNS, Name: name}, obj); !apierrors.IsNotFound(err) {
				left = append(left, name)
			}
		}
		return len(left) == 0, fmt.Sprint(left)
	})
}

// TestMovedSealerNamespaceFollowsRunningPods: an operator restarted with another
// --sealer-namespace (an upgrade) follows the pod a running batch already has where its status
// recorded it, instead of taking it for gone and starting a second sealer on the slot; the
// release stops it there.
func TestMovedSealerNamespaceFollowsRunningPods(t *testing.T) {
	h := newHarnessWith(t, func(h *harness) { h.sealerNS = "sealers-old" })
	tenant := h.namespace("tenant-u")
	h.addNode("node-u", 1, 8, nil)
	h.newBatch(tenant, "b", 2, nil)
	var b *sealv1.SealBatch
	h.eventually("a pod", func() (bool, string) { b = h.batch(tenant, "b"); return b.Status.PodName != "", b.Status.Message })
	old := h.waitPod("sealers-old", b.Status.PodName)
	h.setPod(old, corev1.PodRunning, 0, "")
	h.waitPhase(tenant, "b", sealv1.PhasePC1)

	h.stopOperator()
	h.sealerNS = "sealers-new"
	h.namespace(h.sealerNS)
	h.startOperator()
	time.Sleep(2 * time.Second) // the new operator has looked at the batch
	var pods corev1.PodList
	if err := h.c.List(context.Background(), &pods, client.InNamespace("sealers-new")); err != nil || len(pods.Items) != 0 {
		t.Fatalf("a second sealer started in the new namespace: %d pods (%v)", len(pods.Items), err)
	}
	if got := h.batch(tenant, "b"); got.Status.Phase != sealv1.PhasePC1 || got.Status.Attempts != 1 {
		t.Errorf("batch after the move: phase %s attempts %d (%s)", got.Status.Phase, got.Status.Attempts, got.Status.Message)
	}
	if err := h.c.Delete(context.Background(), h.batch(tenant, "b")); err != nil {
		t.Fatal(err)
	}
	h.eventually("the old pod stopped by the release", func() (bool, string) {
		p := h.pod("sealers-old", old.Name)
		return p == nil || p.DeletionTimestamp != nil, "still running"
	})
}
