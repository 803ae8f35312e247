package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestNodePodNamespacesMustBeServed: a builder or scrub namespace outside --watch-namespaces is
// refused at start-up with the flag and the fix; inside, or with every namespace served, or
// with node caches off, it is accepted.
func TestNodePodNamespacesMustBeServed(t *testing.T) {
	for flag, o := range map[string]Options{
		"--parent-cache-namespace": {WatchNamespaces: "a,b", ParentCacheNamespace: "c", ScrubNamespace: "a"},
		"--scrub-namespace":        {WatchNamespaces: "a,b", ParentCacheNamespace: "a", ScrubNamespace: "c"},
	} {
		err := o.checkNodePodNamespaces()
		if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "watchNamespaces") {
			t.Errorf("%s outside the served namespaces: %v", flag, err)
		}
	}
	for _, o := range []Options{{WatchNamespaces: "a,b", ParentCacheNamespace: "b", ScrubNamespace: "a"}, {ParentCacheNamespace: "c", ScrubNamespace: "d"}, {WatchNamespaces: "a", ScrubNamespace: "a"}} {
		if err := o.checkNodePodNamespaces(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// fakeReviewer answers SelfSubjectAccessReviews from a set of allowed "namespace verb resource".
type fakeReviewer struct {
	allowed map[string]bool
	asked   []string
}

func (f *fakeReviewer) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	a := obj.(*authorizationv1.SelfSubjectAccessReview).Spec.ResourceAttributes
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	key := a.Namespace + " " + a.Verb + " " + res
	f.asked = append(f.asked, key)
	obj.(*authorizationv1.SelfSubjectAccessReview).Status.Allowed = f.allowed[key]
	return nil
}

// allowAll grants every right the options need, as the chart's Roles do.
func allowAll(o *Options) map[string]bool {
	m := map[string]bool{}
	for _, nr := range o.requiredPodRights() {
		for _, r := range nr.rights {
			res := r.resource
			if r.subresource != "" {
				res += "/" + r.subresource
			}
			m[nr.namespace+" "+r.verb+" "+res] = true
		}
	}
	return m
}

// TestPodRightsWhereConfigured: the operator needs pod rights exactly in its node-pod
// namespaces (ConfigMaps and budgets in the sealer's only), every namespace served in the legacy
// mode; a missing right refuses the start naming the namespace, the right, the flag and the Role.
func TestPodRightsWhereConfigured(t *testing.T) {
	o := Options{SealerNamespace: "sealers", ScrubNamespace: "sealfleet-system", ParentCacheNamespace: "sealfleet-system", PodsRoleName: "sf-operator-pods"}
	var got []string
	for _, nr := range o.requiredPodRights() {
		got = append(got, fmt.Sprintf("%s:%d", nr.namespace, len(nr.rights)))
	}
	if want := []string{"sealers:15", "sealfleet-system:6"}; !slices.Equal(got, want) {
		t.Errorf("rights by namespace %v, want %v", got, want)
	}
	if nss := o.podNamespaces(); !slices.Equal(nss, []string{"sealers", "sealfleet-system"}) {
		t.Errorf("pod namespaces %v", nss)
	}
	f := &fakeReviewer{allowed: allowAll(&o)}
	if err := o.checkPodRights(context.Background(), f); err != nil {
		t.Fatalf("all granted: %v", err)
	}
	for _, q := range f.asked {
		if strings.HasPrefix(q, " ") {
			t.Errorf("asked about every namespace: %q", q)
		}
	}
	delete(f.allowed, "sealers create pods")
	delete(f.allowed, "sealers create configmaps")
	err := o.checkPodRights(context.Background(), f)
	if err == nil {
		t.Fatal("started without the right to create pods in the sealer namespace")
	}
	for _, want := range []string{`namespace "sealers"`, "create pods, create configmaps", "--sealer-namespace", "the Role sf-operator-pods"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "sealfleet-system") {
		t.Errorf("refusal names a namespace with every right: %v", err)
	}

	// Legacy: sealer pods in each batch's namespace, so pod rights in every namespace served.
	legacy := Options{ScrubNamespace: "scrubs"}
	if nr := legacy.requiredPodRights(); nr[0].namespace != "" || legacy.podNamespaces() != nil {
		t.Errorf("legacy mode: %+v, cache %v", nr, legacy.podNamespaces())
	}
	f = &fakeReviewer{allowed: allowAll(&Options{SealerNamespace: "x", ScrubNamespace: "scrubs"})}
	if err := legacy.checkPodRights(context.Background(), f); err == nil || !strings.Contains(err.Error(), "in every namespace") || !strings.Contains(err.Error(), "podRightsInBatchNamespaces") {
		t.Errorf("legacy mode without cluster-wide rights: %v", err)
	}
	watched := Options{WatchNamespaces: "a,b", ScrubNamespace: "a"}
	got = nil
	for _, nr := range watched.requiredPodRights() {
		got = append(got, nr.namespace)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("legacy mode with --watch-namespaces a,b: rights in %v", got)
	}
}

// TestCacheHoldsPodsOnlyWhereTheOperatorRunsThem: pods, ConfigMaps and budgets are cached in
// the node-pod namespaces only (the operator has no rights to list them elsewhere).
func TestCacheHoldsPodsOnlyWhereTheOperatorRunsThem(t *testing.T) {
	o := Options{SealerNamespace: "sealers", ScrubNamespace: "scrubs", ParentCacheNamespace: "scrubs"}
	c := o.CacheOptions()
	if c.DefaultNamespaces != nil {
		t.Errorf("SealBatches cached in %v only", c.DefaultNamespaces)
	}
	for obj, by := range c.ByObject {
		_, sealers := by.Namespaces["sealers"]
		_, scrubs := by.Namespaces["scrubs"]
		if len(by.Namespaces) != 2 || !sealers || !scrubs {
			t.Errorf("%T cached in %v, want sealers and scrubs", obj, by.Namespaces)
		}
	}
	if len(c.ByObject) != 3 {
		t.Errorf("namespaced caches for %d kinds, want pods, ConfigMaps and budgets", len(c.ByObject))
	}
	if legacy := (&Options{ScrubNamespace: "scrubs"}).CacheOptions(); legacy.ByObject != nil {
		t.Errorf("legacy mode confines pods to %v", legacy.ByObject)
	}
}
