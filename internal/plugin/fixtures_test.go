package plugin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/kube"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/testutil"
)

// now is the tests' fixed clock.
var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }

const gib = int64(1) << 30

// sealerNode is a Ready node with one 4 GiB layer device split into two slots.
func sealerNode(name string, opts ...func(*sealv1.SealerNode)) sealv1.SealerNode {
	n := sealv1.SealerNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Spec.Pipelines = 2
	n.Status.LayerDevices = []sealv1.LayerDeviceStatus{{Path: "/dev/nvme1n1", CapacityBytes: 4 * gib, Ready: true}}
	n.Status.Slots = ledger.GeometryOf(&n).Status()
	n.Status.Conditions = []metav1.Condition{{Type: sealv1.CondReady, Status: metav1.ConditionTrue, Reason: "Ready"}}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func notReady(reason, msg string) func(*sealv1.SealerNode) {
	return func(n *sealv1.SealerNode) {
		n.Status.Conditions = []metav1.Condition{{Type: sealv1.CondReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
	}
}

func cordoned(n *sealv1.SealerNode) { n.Spec.Cordon = true }

// batch is a 32 GiB CC batch of 2 sectors (numbers 100, 101) in namespace ns.
func batch(name string, opts ...func(*sealv1.SealBatch)) sealv1.SealBatch {
	return *testutil.Batch("ns", name, sealv1.SectorSize32GiB, 2, append([]func(*sealv1.SealBatch){testutil.NumberedFrom(100)}, opts...)...)
}

// placedAt records a placement on node/slot in phase, placed `held` ago.
func placedAt(node string, slot int32, phase sealv1.SealBatchPhase, held time.Duration) func(*sealv1.SealBatch) {
	return func(b *sealv1.SealBatch) {
		testutil.Placed(node, slot, phase)(b)
		b.Status.PlacedTime = ago(held)
	}
}

func released(b *sealv1.SealBatch) {
	b.Status.Conditions = append(b.Status.Conditions, metav1.Condition{Type: sealv1.CondReleased, Status: metav1.ConditionTrue, Reason: "Completed"})
}

func completed(since time.Duration, sectors int) func(*sealv1.SealBatch) {
	return func(b *sealv1.SealBatch) {
		b.Status.Phase = sealv1.PhaseCompleted
		b.Status.CompletionTime = ago(since)
		for i := 0; i < sectors; i++ {
			b.Status.Sectors = append(b.Status.Sectors, sealv1.SectorStatus{Number: int64(100 + i), State: "Sealed"})
		}
	}
}

// update makes the batch a SnapDeals update placed on node (it holds no slot).
func update(node string) func(*sealv1.SealBatch) {
	return func(b *sealv1.SealBatch) {
		b.Spec.Update = &sealv1.SnapUpdate{SectorKeys: sealv1.SectorKeySource{HostPath: &sealv1.HostPathData{Path: "/keys"}}}
		b.Status.Node, b.Status.Phase, b.Status.PlacedTime = node, sealv1.PhaseUpdating, ago(3*time.Minute)
	}
}

func pendingWith(msg string) func(*sealv1.SealBatch) {
	return func(b *sealv1.SealBatch) { b.Status.Phase, b.Status.Message = sealv1.PhasePending, msg }
}

// fakeClient holds the objects, with SealBatch status a subresource and the event fields
// `batch` selects on indexed.
func fakeClient(objs ...client.Object) client.WithWatch { return fakeBuilder(objs...).Build() }

// fakeClientWith is fakeClient with calls passing through f.
func fakeClientWith(f interceptor.Funcs, objs ...client.Object) client.WithWatch {
	return fakeBuilder(objs...).WithInterceptorFuncs(f).Build()
}

func fakeBuilder(objs ...client.Object) *fake.ClientBuilder {
	return fake.NewClientBuilder().
		WithScheme(kube.Scheme()).
		WithStatusSubresource(&sealv1.SealBatch{}, &sealv1.SealerNode{}).
		WithIndex(&corev1.Event{}, "involvedObject.kind", func(o client.Object) []string {
			return []string{o.(*corev1.Event).InvolvedObject.Kind}
		}).
		WithIndex(&corev1.Event{}, "involvedObject.name", func(o client.Object) []string {
			return []string{o.(*corev1.Event).InvolvedObject.Name}
		}).
		WithObjects(objs...)
}

func objects[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// run executes the plugin with args against c and returns stdout, stderr and the exit code.
func run(t *testing.T, c client.Client, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runEnv(t, Env{In: strings.NewReader(stdin), Now: func() time.Time { return now }, Client: c}, args...)
}

// runEnv is run with a chosen Env (its streams are replaced; namespace "ns" by default).
func runEnv(t *testing.T, env Env, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	env.Out, env.Err = &out, &errOut
	if env.Namespace == "" {
		env.Namespace = "ns"
	}
	if env.PollInterval == 0 {
		env.PollInterval = time.Millisecond
	}
	root := NewRootCommand(env)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		errOut.WriteString("error: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), exitCode(err)
}

// splitRows splits output into lines of whitespace-separated fields.
func splitRows(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out = append(out, strings.Fields(l))
	}
	return out
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
