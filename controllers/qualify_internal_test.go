package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
	"github.com/sealfleet/sealfleet/internal/render"
)

func TestQualificationContract(t *testing.T) {
	ex := contracts.SealerQualificationExamples()
	for _, key := range contracts.UnknownKeys(ex, qualificationDoc{}) {
		t.Errorf("the operator reads %q, which no example of contracts/sealer-qualification.json holds", key)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		render.AnnotationQualifyRequest: "r1", render.AnnotationQualifyDevices: "/dev/nvme1n1,/dev/nvme2n1"}}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: string(ex[0])}}}}
	doc, err := (&Qualifier{}).readDocument(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	q := doc.toStatus(pod)
	if len(q.LayerDevices) != 2 || q.ReadIOPS() != 612345+598210 || q.LabelsPerSecondPerThread != 2400000 || q.HashKernel != "sha-ni" {
		t.Fatalf("status %+v", q)
	}
	if d := q.LayerDevices[1]; d.SeqWriteBytesPerSecond != 0 || d.WriteSkipped != "no free slot to write in" || !d.Direct {
		t.Fatalf("second device %+v", d)
	}
	if q.Request != "r1" || q.DevicesKey != "/dev/nvme1n1,/dev/nvme2n1" || q.MeasuredTime.Unix() != 1795000015 || q.DurationMilliseconds != 15200 {
		t.Fatalf("bookkeeping %+v", q)
	}
	if q.Hugepages1GiFree != 4 || q.Hugepages1GiMapped != 1 || !strings.Contains(q.GPU, "H100") || q.Message != "" {
		t.Fatalf("hugepages/gpu %+v", q)
	}
}

func TestNeedsQualification(t *testing.T) {
	ready := []metav1.Condition{{Type: sealv1.CondReady, Status: metav1.ConditionTrue}}
	node := func(policy sealv1.QualifyPolicy, ann string, q *sealv1.Qualification) *sealv1.SealerNode {
		sn := &sealv1.SealerNode{Spec: sealv1.SealerNodeSpec{Qualify: policy, LayerDevices: []sealv1.LayerDevice{{Path: "/dev/nvme1n1"}}}}
		sn.Status.Conditions = ready
		sn.Status.LayerDevices = []sealv1.LayerDeviceStatus{{Path: "/dev/nvme1n1", Ready: true}}
		sn.Status.Qualification = q
		if ann != "" {
			sn.Annotations = map[string]string{sealv1.AnnotationQualify: ann}
		}
		return sn
	}
	done := &sealv1.Qualification{DevicesKey: "/dev/nvme1n1", Request: "a"}
	for _, tc := range []struct {
		name string
		sn   *sealv1.SealerNode
		want string
	}{
		{"joined", node(sealv1.QualifyOnJoin, "", nil), "joined"},
		{"OnRequest waits", node(sealv1.QualifyOnRequest, "", nil), ""},
		{"request answered", node(sealv1.QualifyOnJoin, "a", done), ""},
		{"new request", node(sealv1.QualifyOnRequest, "b", done), "requested"},
		{"devices changed", node(sealv1.QualifyOnJoin, "", &sealv1.Qualification{DevicesKey: "/dev/nvme0n1"}), "layer devices changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := needsQualification(tc.sn)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	notReady := node(sealv1.QualifyOnJoin, "", nil)
	notReady.Status.Conditions = nil
	if got := needsQualification(notReady); got != "" {
		t.Fatalf("a node not Ready qualified: %q", got)
	}
}
