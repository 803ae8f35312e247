package chart_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sealfleet/sealfleet/controllers"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

// TestOperatorRBACOnAPIServer applies the default chart's operator RBAC to a real API server
// (envtest) and acts as the operator's ServiceAccount: it may create pods in its own namespace
// and not in default (what `kubectl auth can-i create pods --as=<sa> -n default` asks); it
// starts with the chart's flags, and refuses to start, naming the namespace and the missing
// Role, when pointed at a sealer namespace the chart gave it no Role in.
func TestOperatorRBACOnAPIServer(t *testing.T) {
	objs := render(t)
	env := testenv.Start(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sealfleet-system"}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		switch o["kind"] {
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if get(o, "metadata", "labels", "app.kubernetes.io/component") != "operator" {
				continue
			}
			if err := env.Client.Create(ctx, &unstructured.Unstructured{Object: o}); err != nil {
				t.Fatalf("create %s %s: %v", o["kind"], get(o, "metadata", "name"), err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("chart renders no operator RBAC")
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:sealfleet-system:sf-sealfleet-operator",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:sealfleet-system", "system:authenticated"}}
	operator, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	canCreatePods := func(ns string) bool {
		rev := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods"}}}
		if err := operator.Create(ctx, rev); err != nil {
			t.Fatal(err)
		}
		return rev.Status.Allowed
	}
	for ns, want := range map[string]bool{"sealfleet-system": true, "default": false, "sealfleet-batches": false, "": false} {
		if got := canCreatePods(ns); got != want {
			t.Errorf("operator may create pods in namespace %q: %v, want %v", ns, got, want)
		}
	}

	// The operator with the chart's flags starts; with a sealer namespace outside its Roles it
	// refuses before it serves anything.
	start := func(sealerNS string) error {
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
		if err != nil {
			t.Fatal(err)
		}
		opts := controllers.Options{SealerNamespace: sealerNS, ScrubNamespace: "sealfleet-system", ParentCacheNamespace: "sealfleet-system",
			PodsRoleName: "sf-sealfleet-operator-pods", ProgressInterval: time.Second}
		return controllers.Setup(mgr, opts)
	}
	if err := start("sealfleet-system"); err != nil {
		t.Errorf("operator with the chart's defaults refused to start: %v", err)
	}
	err = start("tenant-a")
	if err == nil {
		t.Fatal("operator started with --sealer-namespace=tenant-a, where it may not create pods")
	}
	for _, want := range []string{`namespace "tenant-a"`, "create pods", "--sealer-namespace", "sf-sealfleet-operator-pods"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}
