package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

// TestSealOrderValidation: an order is one CC sector of one partner, named after it, with a
// proof type the protocol carries; what identifies it and its seed never change.
func TestSealOrderValidation(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	order := func(name string, mutate func(*sealv1.SealOrderSpec)) *sealv1.SealOrder {
		o := &sealv1.SealOrder{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: sealv1.SealOrderSpec{
			Partner: "alpha", MinerID: "f01000", SectorNumber: 42, SectorSize: sealv1.SectorSize32GiB, ProofType: sealv1.ProofTypeV1_1}}
		if mutate != nil {
			mutate(&o.Spec)
		}
		return o
	}
	for name, tc := range map[string]struct {
		name   string
		mutate func(*sealv1.SealOrderSpec)
		want   string
	}{
		"ni-porep": {"f01000-42", func(s *sealv1.SealOrderSpec) { s.ProofType = sealv1.ProofTypeNIPoRep }, "spec.proofType: delegated remote seal orders are CC sectors"},
		"v1":       {"f01000-42", func(s *sealv1.SealOrderSpec) { s.ProofType = sealv1.ProofTypeV1 }, "spec.proofType"},
		"miner":    {"x-42", func(s *sealv1.SealOrderSpec) { s.MinerID = "x" }, "spec.minerID"},
		"seed":     {"f01000-42", func(s *sealv1.SealOrderSpec) { s.Seed = &sealv1.OrderSeed{Randomness: "zz"} }, "spec.seed.randomness"},
	} {
		err := env.Client.Create(ctx, order(tc.name, tc.mutate))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want refused with %q, got %v", name, tc.want, err)
		}
	}
	o := order("f01000-42", func(s *sealv1.SealOrderSpec) { s.ProofType = sealv1.ProofTypeSyntheticPoRep })
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatalf("valid order refused: %v", err)
	}
	moved := o.DeepCopy()
	moved.Spec.Partner = "beta"
	if err := env.Client.Update(ctx, moved); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Errorf("partner changed: %v", err)
	}
	o.Spec.Seed = &sealv1.OrderSeed{Randomness: strings.Repeat("ab", 32)}
	o.Spec.Finalized = true
	if err := env.Client.Update(ctx, o); err != nil {
		t.Fatalf("seed and finalize refused: %v", err)
	}
	o.Spec.Seed = &sealv1.OrderSeed{Randomness: strings.Repeat("cd", 32)}
	if err := env.Client.Update(ctx, o); err == nil || !strings.Contains(err.Error(), "spec.seed cannot change") {
		t.Errorf("seed changed: %v", err)
	}
}
