package chart_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/nodeagent"
	"github.com/sealfleet/sealfleet/internal/testenv"
	"github.com/sealfleet/sealfleet/internal/testutil"
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

// TestNodeAgentWritesOnlyItsOwnNode applies the chart's node-agent RBAC and admission policy to
// a real API server and acts as the agent's ServiceAccount (impersonated, with the node name a
// pod-bound token carries): it may create and write its own SealerNode's status; it may not
// write another node's, change spec, create a SealerNode with layer devices, clear the
// operator's dirty slots, fake the operator's qualification, or delete; a token naming no node may write nothing. The operator
// (here the admin) is not bound by the policy.
func TestNodeAgentWritesOnlyItsOwnNode(t *testing.T) {
	objs := render(t)
	env := testenv.Start(t)
	ctx := context.Background()
	for _, ref := range [][2]string{
		{"ClusterRole", "sf-sealfleet-node-agent"}, {"ClusterRoleBinding", "sf-sealfleet-node-agent"},
		{"ValidatingAdmissionPolicy", "sf-sealfleet-node-agent-own-node"}, {"ValidatingAdmissionPolicyBinding", "sf-sealfleet-node-agent-own-node"},
	} {
		o := find(objs, ref[0], ref[1])
		if o == nil {
			t.Fatalf("chart renders no %s %s", ref[0], ref[1])
		}
		if err := env.Client.Create(ctx, &unstructured.Unstructured{Object: o}); err != nil {
			t.Fatalf("create %s: %v", ref[0], err)
		}
	}
	sa := "system:serviceaccount:sealfleet-system:sf-sealfleet-node-agent"
	agent := func(node string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:sealfleet-system", "system:authenticated"}}
		if node != "" {
			cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
		}
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	n1, none := agent("n1"), agent("")
	admin := env.Client
	for _, name := range []string{"n1", "n2"} {
		if err := admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	sealerNode := func(name string, devices ...sealv1.LayerDevice) *sealv1.SealerNode {
		return &sealv1.SealerNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sealv1.SealerNodeSpec{LayerDevices: devices}}
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want refused with %q, got %v", what, want, err)
		}
	}
	// The policy is enforced once the API server has loaded it.
	deadline := time.Now().Add(time.Minute)
	for {
		err := n1.Create(ctx, sealerNode("n2"))
		if err != nil && strings.Contains(err.Error(), "may write only SealerNode n1") {
			break
		}
		if err == nil {
			_ = admin.Delete(ctx, sealerNode("n2"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent on n1 can still create SealerNode n2 after a minute: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	refused("a SealerNode with layer devices", n1.Create(ctx, sealerNode("n1", sealv1.LayerDevice{Path: "/dev/sda"})), "creates its SealerNode without one")
	// The real agent loop, with the agent's credentials: it creates its SealerNode and
	// publishes status under the policy.
	a := &nodeagent.Agent{Client: n1, NodeName: "n1", Root: testutil.CopyTree(t, filepath.Join(testenv.RepoRoot(), "internal", "topology", "testdata", "epyc-7313")), DryRun: true}
	if wrote, err := a.SyncOnce(ctx); err != nil || !wrote {
		t.Fatalf("the node agent's own sync under the policy: wrote=%v err=%v", wrote, err)
	}
	// The admin writes the spec and the operator a dirty slot; the agent publishes status.
	var own sealv1.SealerNode
	if err := admin.Get(ctx, client.ObjectKey{Name: "n1"}, &own); err != nil {
		t.Fatal(err)
	}
	own.Spec.LayerDevices = []sealv1.LayerDevice{{Path: "/var/lib/sealfleet/layers.img"}}
	if err := admin.Update(ctx, &own); err != nil {
		t.Fatal(err)
	}
	own.Status.DirtySlots = []sealv1.DirtySlot{{Slot: 0, LengthBytes: 1 << 20, Batch: "ns/b", BatchUID: "u", Since: metav1.Now()}}
	if err := admin.Status().Update(ctx, &own); err != nil {
		t.Fatalf("the operator cannot record a dirty slot: %v", err)
	}
	before := own.DeepCopy()
	own.Status.FreeCores = 7
	if err := n1.Status().Patch(ctx, &own, client.MergeFrom(before)); err != nil {
		t.Errorf("the agent cannot write its own status: %v", err)
	}
	if err := admin.Create(ctx, sealerNode("n2")); err != nil {
		t.Fatal(err)
	}
	other := sealerNode("n2")
	if err := admin.Get(ctx, client.ObjectKey{Name: "n2"}, other); err != nil {
		t.Fatal(err)
	}
	o2 := other.DeepCopy()
	o2.Status.FreeCores = 1
	refused("another node's status", n1.Status().Patch(ctx, o2, client.MergeFrom(other)), "may write only SealerNode n1, not n2")

	if err := admin.Get(ctx, client.ObjectKey{Name: "n1"}, &own); err != nil {
		t.Fatal(err)
	}
	edited := own.DeepCopy()
	edited.Spec.LayerDevices = append(edited.Spec.LayerDevices, sealv1.LayerDevice{Path: "/dev/sda"})
	refused("its own spec", n1.Patch(ctx, edited, client.MergeFrom(&own)), "spec is the administrator's")
	cleared := own.DeepCopy()
	cleared.Status.DirtySlots = nil
	refused("the operator's dirty slots", n1.Status().Patch(ctx, cleared, client.MergeFrom(&own)), "never changes it")
	faked := own.DeepCopy()
	faked.Status.Qualification = &sealv1.Qualification{Request: "x", LabelsPerSecondPerThread: 9_000_000,
		LayerDevices: []sealv1.DeviceQualification{{Path: "/var/lib/sealfleet/layers.img", RandomReadIOPS: 9_000_000}}}
	refused("the operator's qualification", n1.Status().Patch(ctx, faked, client.MergeFrom(&own)), "status.qualification is what the operator's qualification pod measured")
	refused("deleting its SealerNode", n1.Delete(ctx, &own), "forbidden") // RBAC grants no delete; the policy refuses it too
	touched := own.DeepCopy()
	touched.Status.FreeCores = 3
	refused("a token naming no node", none.Status().Patch(ctx, touched, client.MergeFrom(&own)), "names no node")
}
