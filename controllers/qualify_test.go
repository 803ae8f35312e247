package controllers_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
	"github.com/sealfleet/sealfleet/internal/render"
)

// A node that joins with spec.qualify OnJoin is measured: its qualification pod's write test
// gets a free slot booked as dirty first (a batch placed meanwhile takes the other slot), the
// figures land in status.qualification, and the scrub discards the written range once the pod
// is gone. A new sealfleet.io/qualify value measures it again; a failed run keeps the figures
// and says why.
func TestQualificationBooksItsSlotAndRecordsTheFigures(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ns := h.namespace("qualify")
	h.addNode("node-q", 2, 8, nil)
	sn := h.sealerNode("node-q")
	sn.Spec.Qualify = sealv1.QualifyOnJoin
	if err := h.c.Update(ctx, sn); err != nil {
		t.Fatal(err)
	}
	pod := h.waitPod(scrubNS, render.QualifyPodName("node-q"))
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	slot := pod.Annotations[render.AnnotationQualifySlot]
	if !strings.Contains(args, "--write-range ") || !strings.Contains(args, "--device /var/lib/sealfleet/layers.img") || slot == "" {
		t.Fatalf("qualification pod runs %q (slot %q)", args, slot)
	}
	if _, ok := pod.Spec.Containers[0].Resources.Limits["hugepages-1Gi"]; !ok || !strings.Contains(args, "--hugepages-probe 1") {
		t.Errorf("the hugepage probe holds no hugepage: %q %v", args, pod.Spec.Containers[0].Resources.Limits)
	}
	var booked sealv1.DirtySlot
	h.eventually("write slot booked", func() (bool, string) {
		for _, d := range h.sealerNode("node-q").Status.DirtySlots {
			if strings.HasPrefix(d.BatchUID, "qualify-") {
				booked = d
				return true, ""
			}
		}
		return false, "no qualification record"
	})
	if n, err := strconv.Atoi(slot); err != nil || booked.Slot != int32(n) {
		t.Fatalf("booked slot %d, pod writes slot %s", booked.Slot, slot)
	}
	// A batch placed while the test runs takes the other slot.
	h.newBatch(ns, "b", 1, nil)
	placed := h.waitPhase(ns, "b", sealv1.PhasePlaced)
	if *placed.Status.Slot == booked.Slot {
		t.Fatalf("batch placed on slot %d, which the qualification writes", booked.Slot)
	}
	if p := placed.Status.Prediction; p == nil || p.PC1Seconds == "" || p.FinishTime == nil || !strings.Contains(p.Basis, "not qualified") {
		t.Errorf("prediction of a batch on an unqualified node: %+v", p)
	}
	// The scrub waits for the pod.
	if p := h.pod(scrubNS, render.ScrubPodName("node-q", booked.Slot, booked.BatchUID)); p != nil {
		t.Fatalf("scrub pod %s started under the qualification", p.Name)
	}

	h.setPod(pod, corev1.PodSucceeded, 0, string(contracts.SealerQualificationExamples()[0]))
	h.eventually("qualification recorded", func() (bool, string) {
		q := h.sealerNode("node-q").Status.Qualification
		return q != nil && len(q.LayerDevices) == 2 && q.LabelsPerSecondPerThread == 2400000, "not yet"
	})
	h.eventually("qualification pod removed", func() (bool, string) {
		h.reapPods(scrubNS)
		p := h.pod(scrubNS, pod.Name)
		return p == nil, "still there"
	})
	h.succeedScrubs("node-q")
	h.eventually("Qualified event", func() (bool, string) {
		return h.hasEvent("", "node-q", sealv1.NodeReasonQualified, "labels/s per thread"), "none"
	})

	// Asked again: a new pod; its failure keeps the figures and answers the request.
	sn = h.sealerNode("node-q")
	sn.Annotations = map[string]string{sealv1.AnnotationQualify: "again"}
	if err := h.c.Update(ctx, sn); err != nil {
		t.Fatal(err)
	}
	again := h.waitPod(scrubNS, render.QualifyPodName("node-q"))
	if again.Annotations[render.AnnotationQualifyRequest] != "again" {
		t.Fatalf("request annotation %q", again.Annotations[render.AnnotationQualifyRequest])
	}
	h.setPod(again, corev1.PodFailed, 3, "device vanished")
	h.eventually("failure recorded", func() (bool, string) {
		q := h.sealerNode("node-q").Status.Qualification
		return q != nil && q.Request == "again" && strings.Contains(q.Message, "device vanished") && q.LabelsPerSecondPerThread == 2400000, "not yet"
	})
}
