package nodeagent

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/kube"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/topology"
)

// TestRunningBatches finds the PC1/PC2 batches placed on this node, reads their layouts from
// the sealer ConfigMaps, and counts their cores out of freeCores.
func TestRunningBatches(t *testing.T) {
	topo, err := topology.Discover("../topology/testdata/tr-pro-5975wx")
	if err != nil {
		t.Fatal(err)
	}
	l, err := layout.Calculate(topo.Layout(), 32, layout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lj, _ := json.Marshal(l)
	cfg, _ := json.Marshal(map[string]any{"sector_size": 2048, "layout": json.RawMessage(lj)})
	batch := func(name, node string, phase sealv1.SealBatchPhase) *sealv1.SealBatch {
		return &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Status: sealv1.SealBatchStatus{Node: node, Phase: phase}}
	}
	c := fake.NewClientBuilder().WithScheme(kube.Scheme()).WithObjects(
		batch("running", "n1", sealv1.PhasePC1),
		batch("elsewhere", "n2", sealv1.PhasePC1),
		batch("done", "n1", sealv1.PhaseCompleted),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "running-sealer-config"}, Data: map[string]string{ConfigKey: string(cfg)}},
	).Build()
	a := &Agent{Client: c, NodeName: "n1"}
	got, err := a.runningBatches(context.Background())
	if err != nil || len(got) != 1 || got[0].Name != "ns/running" || got[0].Layout.Hashers() != 16 {
		t.Fatalf("running batches %+v, %v", got, err)
	}
	if as := Assignments(got); len(as) != 18 {
		t.Errorf("%d assignments, want 2 coordinators + 16 hashers", len(as))
	}
	if n := freeCores(topo.Layout(), nil, got); n != 32-l.PhysicalCores() {
		t.Errorf("free cores %d, want %d", n, 32-l.PhysicalCores())
	}
}
