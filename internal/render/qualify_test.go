package render

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

func TestQualifyPod(t *testing.T) {
	slot := int32(1)
	in := QualifyInput{Namespace: "ops", Node: "n1.example", Roots: []string{"/var/lib/sealfleet"}, Seconds: 2,
		Devices:   []sealv1.LayerDeviceStatus{{Path: "/var/lib/sealfleet/a.img", Ready: true}, {Path: "/srv/b.img", Ready: true}, {Path: "/var/lib/sealfleet/c.img"}},
		WriteSlot: &slot, WriteRange: sealv1.SlotRange{OffsetBytes: 1 << 30, LengthBytes: 1 << 30}, Hugepage: true, Request: "r", DevicesKey: "k"}
	p := QualifyPod(in, podOpts())
	c := p.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	// Only the ready device under a root is measured; the write range is the booked slot's.
	if !strings.Contains(args, "--device /var/lib/sealfleet/a.img") || strings.Contains(args, "b.img") || strings.Contains(args, "c.img") ||
		!strings.Contains(args, "--write-range 1073741824:1073741824") || !strings.Contains(args, "--hugepages-probe 1") {
		t.Fatalf("args %q", args)
	}
	if p.Name != "qualify-n1-example" || p.Annotations[AnnotationQualifySlot] != "1" || p.Annotations[AnnotationQualifyRequest] != "r" || PodNode(p) != "n1.example" {
		t.Fatalf("pod %s %v on %s", p.Name, p.Annotations, PodNode(p))
	}
	if hp := c.Resources.Limits["hugepages-1Gi"]; hp.Value() != 1<<30 || *c.SecurityContext.Privileged {
		t.Fatalf("hugepages %v, privileged %v for files only", hp, *c.SecurityContext.Privileged)
	}
	// A block device needs a privileged container; without a slot the write is skipped, saying why.
	in.Devices, in.WriteSlot, in.NoWriteReason, in.Hugepage = []sealv1.LayerDeviceStatus{{Path: "/dev/nvme1n1", Ready: true}}, nil, "no free slot", false
	p = QualifyPod(in, podOpts())
	c = p.Spec.Containers[0]
	args = strings.Join(c.Args, " ")
	if !*c.SecurityContext.Privileged || strings.Contains(args, "--write-range") || !strings.Contains(args, "--no-write-reason no free slot") ||
		!strings.Contains(args, "--hugepages-probe 0") || p.Spec.Volumes[0].HostPath.Type == nil || *p.Spec.Volumes[0].HostPath.Type != corev1.HostPathBlockDev {
		t.Fatalf("block device pod: %q %+v", args, p.Spec.Volumes)
	}
	if _, ok := c.Resources.Limits["hugepages-1Gi"]; ok {
		t.Fatal("a pod that probes no hugepage holds one")
	}
}
