package chart_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

// TestWatchNamespacesRefusesOtherNamespaces applies the chart's admission policy to a real
// API server (envtest): with operator.watchNamespaces a SealBatch outside those namespaces is
// refused with a message naming them, one inside is stored.
func TestWatchNamespacesRefusesOtherNamespaces(t *testing.T) {
	objs := render(t, "--set", "operator.watchNamespaces={served}", "--set", "batchNamespace.create=false")
	env := testenv.Start(t)
	ctx := context.Background()
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		o := find(objs, kind, "sf-sealfleet-batch-namespaces")
		if o == nil {
			t.Fatalf("chart renders no %s with watchNamespaces", kind)
		}
		if err := env.Client.Create(ctx, &unstructured.Unstructured{Object: o}); err != nil {
			t.Fatalf("create %s: %v", kind, err)
		}
	}
	for _, ns := range []string{"served", "elsewhere"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(ns, name string) *sealv1.SealBatch {
		return &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: sealv1.SealBatchSpec{
			SectorSize: sealv1.SectorSize8MiB, MinerID: "f01000",
			Sectors: []sealv1.SectorSpec{{Number: 1, Ticket: strings.Repeat("ab", 32)}},
		}}
	}
	// The policy is enforced once the API server has loaded it (about a second).
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		b := batch("elsewhere", fmt.Sprintf("b%d", i))
		err := env.Client.Create(ctx, b)
		if err != nil {
			if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "only in the namespaces served") {
				t.Fatalf("refused for another reason: %v", err)
			}
			t.Logf("refused: %v", err)
			break
		}
		_ = env.Client.Delete(ctx, b)
		if time.Now().After(deadline) {
			t.Fatal("a SealBatch outside operator.watchNamespaces is still accepted after a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := env.Client.Create(ctx, batch("served", "ok")); err != nil {
		t.Errorf("SealBatch in a watched namespace refused: %v", err)
	}
}
