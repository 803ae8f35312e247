package controllers_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sealfleet/sealfleet/controllers"
)

// TestPodCreationRefusedIsVisible: in a namespace whose ResourceQuota allows no pods, the
// placed batch says why its sealer pod does not exist (condition, message, one warning event)
// instead of sitting silently on its slot; it keeps its slot meanwhile, and once the quota is
// lifted the pod is created and the condition says the refusal is over.
func TestPodCreationRefusedIsVisible(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("refused")
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if err := h.c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// envtest runs no quota controller: write the usage it would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := h.c.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	h.addNode("node-q", 1, 8, nil)
	h.newBatch(ns, "b", 2, nil)

	h.eventually("the refusal on the batch", func() (bool, string) {
		b := h.batch(ns, "b")
		c := condition(b, controllers.CondPodCreationRefused)
		if c == nil || c.Status != metav1.ConditionTrue {
			return false, b.Status.Message
		}
		if c.Reason != string(controllers.ReasonQuotaExceeded) || !strings.Contains(c.Message, "sealer pod b-sealer-1") ||
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
		if e.Reason == controllers.CondPodCreationRefused && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == "b" {
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
	b := h.batch(ns, "b")
	b.Annotations = map[string]string{"test/poke": "1"}
	if err := h.c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	h.waitPod(ns, "b-sealer-1")
	h.eventually("the refusal marked over", func() (bool, string) {
		c := condition(h.batch(ns, "b"), controllers.CondPodCreationRefused)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(controllers.ReasonPodCreated), "condition still refused"
	})
}
