package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

// TestPodCreationRefusedIsVisible: in a namespace whose ResourceQuota allows no pods, the
// placed batch says why its sealer pod does not exist (condition, message, one warning event)
// instead of sitting silently on its slot; it keeps its slot meanwhile, and once the quota is
// lifted the pod is created and the condition says the refusal is over.
func TestPodCreationRefusedIsVisible(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("refused")
	quota := h.noPodsQuota(ns)
	h.addNode("node-q", 1, 8, nil)
	h.newBatch(ns, "b", 2, nil)

	h.eventually("the refusal on the batch", func() (bool, string) {
		b := h.batch(ns, "b")
		c := condition(b, sealv1.CondPodCreationRefused)
		if c == nil || c.Status != metav1.ConditionTrue {
			return false, b.Status.Message
		}
		if c.Reason != string(sealv1.ReasonQuotaExceeded) || !strings.Contains(c.Message, "sealer pod b-sealer-1") ||
			!strings.Contains(c.Message, "no-pods") || b.Status.Message != c.Message {
			t.Fatalf("condition %+v, message %q", c, b.Status.Message)
		}
		return true, ""
	})
	if held := h.held("node-q"); len(held) != 1 {
		t.Errorf("the refused batch holds %d claims on its node, want its slot (1)", len(held))
	}
	if p := h.pod(ns, "b-sealer-1"); p != nil {
		t.Fatalf("a pod exists despite the quota: %s", p.Name)
	}
	var events corev1.EventList
	if err := h.c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	refusals := 0
	for _, e := range events.Items {
		if e.Reason == sealv1.CondPodCreationRefused && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == "b" {
			refusals += int(max(e.Count, 1))
		}
	}
	if refusals != 1 {
		t.Errorf("%d PodCreationRefused events for one unchanged refusal, want 1", refusals)
	}

	if err := h.c.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// An edit of the batch retries at once (no need to wait out the backoff).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the operator writes its status meanwhile
		b := h.batch(ns, "b")
		b.Annotations = map[string]string{"test/poke": "1"}
		return h.c.Update(ctx, b)
	}); err != nil {
		t.Fatal(err)
	}
	h.waitPod(ns, "b-sealer-1")
	h.eventually("the refusal marked over", func() (bool, string) {
		c := condition(h.batch(ns, "b"), sealv1.CondPodCreationRefused)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(sealv1.ReasonPodCreated), "condition still refused"
	})
}

// TestDeletionFinishesWhenNoScrubCanRun: a batch whose namespace allows no pods is deleted at
// once (it used to hang on a scrub pod refused by the same quota): its slot is recorded dirty on
// the SealerNode, with an event on the batch saying what was left; the scrub runs in the
// operator's namespace, where a refusal is recorded on the dirty slot and retried with
// back-off; no batch gets the slot until the scrub has succeeded.
func TestDeletionFinishesWhenNoScrubCanRun(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns, other := h.namespace("no-pods-team"), h.namespace("next-team")
	h.noPodsQuota(ns)
	scrubQuota := h.noPodsQuota(scrubNS)
	h.addNode("node-x", 1, 8, nil)
	b := h.newBatch(ns, "b", 2, nil)
	h.eventually("placed, its pod refused", func() (bool, string) {
		c := condition(h.batch(ns, "b"), sealv1.CondPodCreationRefused)
		return c != nil && c.Status == metav1.ConditionTrue, "not refused yet"
	})
	if err := h.c.Delete(ctx, h.batch(ns, "b")); err != nil {
		t.Fatal(err)
	}
	h.eventually("deletion finished", func() (bool, string) { return h.batch(ns, "b") == nil, "still there" })
	h.eventually("the scrub's refusal on the dirty slot", func() (bool, string) {
		d := h.sealerNode("node-x").Status.DirtySlots
		return len(d) == 1 && d[0].BatchUID == string(b.UID) && d[0].Batch == ns+"/b" && d[0].Attempts >= 1 &&
			strings.Contains(d[0].Message, "refused (QuotaExceeded)"), fmt.Sprintf("%+v", d)
	})
	if !h.hasEvent(ns, "b", string(sealv1.ReasonSlotLeftToScrub), "slot 0 of node-x") {
		t.Error("no event on the deleted batch saying what was left to scrub")
	}
	if !h.hasEvent("default", "node-x", string(sealv1.ReasonScrubFailed), "refused") {
		t.Error("no warning on the SealerNode about the refused scrub")
	}
	h.newBatch(other, "next", 2, nil)
	h.eventually("the next batch waits for the scrub", func() (bool, string) {
		c := condition(h.batch(other, "next"), sealv1.CondPlaced)
		return c != nil && strings.Contains(c.Message, "waiting for their scrub"), fmt.Sprintf("%+v", c)
	})

	if err := h.c.Delete(ctx, scrubQuota); err != nil {
		t.Fatal(err)
	}
	h.succeedScrubs("node-x") // after the back-off, the scrub pod runs and succeeds
	if !h.hasEvent("default", "node-x", string(sealv1.ReasonSlotScrubbed), "left by "+ns+"/b") {
		t.Error("no event on the SealerNode for the scrubbed slot")
	}
	if got := h.waitPhase(other, "next", sealv1.PhasePlaced); got.Status.Node != "node-x" {
		t.Errorf("next placed on %q", got.Status.Node)
	}
}

// noPodsQuota gives ns a ResourceQuota that allows no pods.
func (h *harness) noPodsQuota(ns string) *corev1.ResourceQuota {
	h.t.Helper()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if err := h.c.Create(context.Background(), quota); err != nil {
		h.t.Fatal(err)
	}
	// envtest runs no quota controller: write the usage it would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := h.c.Status().Update(context.Background(), quota); err != nil {
		h.t.Fatal(err)
	}
	return quota
}

// TestUnschedulableSealerPodIsVisible: the sealer pod is bound by kube-scheduler (a required
// affinity to the batch's node, no spec.nodeName), so a node whose other pods hold what it
// requests leaves it pending instead of the kubelet rejecting it; the scheduler's words reach
// the batch's message and one event.
func TestUnschedulableSealerPodIsVisible(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("crowded")
	h.addNode("node-c", 1, 8, nil)
	h.newBatch(ns, "b", 2, nil)
	pod := h.waitPod(ns, "b-sealer-1")
	if pod.Spec.NodeName != "" || render.PodNode(pod) != "node-c" {
		t.Fatalf("sealer pod bound by the operator (nodeName %q) or confined elsewhere (%q)", pod.Spec.NodeName, render.PodNode(pod))
	}
	// Play kube-scheduler: the node's CPUs are taken by other pods.
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	if err := h.c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	h.eventually("the scheduler's reason on the batch", func() (bool, string) {
		b := h.batch(ns, "b")
		return strings.Contains(b.Status.Message, "waits for kube-scheduler to bind it to node-c") &&
			strings.Contains(b.Status.Message, "Insufficient cpu"), b.Status.Message
	})
	if !h.hasEvent(ns, "b", string(sealv1.ReasonPodUnschedulable), "Insufficient cpu") {
		t.Error("no PodUnschedulable event")
	}
}
