package plugin

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// pagingServer answers SealBatch lists the way the API server does: at most Limit items,
// and a continue token while more remain. It records each request's limit and token.
type pagingServer struct {
	batches  []sealv1.SealBatch
	requests []client.ListOptions
}

func (s *pagingServer) list(_ context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	s.requests = append(s.requests, o)
	start := 0
	if o.Continue != "" {
		var err error
		if start, err = strconv.Atoi(o.Continue); err != nil {
			return fmt.Errorf("bad continue token %q", o.Continue)
		}
	}
	end := len(s.batches)
	if o.Limit > 0 && start+int(o.Limit) < end {
		end = start + int(o.Limit)
	}
	l := list.(*sealv1.SealBatchList)
	l.Items = append([]sealv1.SealBatch{}, s.batches[start:end]...)
	l.Continue = ""
	if end < len(s.batches) {
		l.Continue = strconv.Itoa(end)
	}
	return nil
}

func TestListAllPaginates(t *testing.T) {
	s := &pagingServer{}
	for i := 0; i < 1234; i++ {
		s.batches = append(s.batches, batch(fmt.Sprintf("b%04d", i)))
	}
	c := fakeClientWith(interceptor.Funcs{List: s.list})
	got, err := listBatches(context.Background(), c, client.InNamespace("ns"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1234 || got[0].Name != "b0000" || got[500].Name != "b0500" || got[1233].Name != "b1233" {
		t.Fatalf("read %d batches (first %s)", len(got), got[0].Name)
	}
	if len(s.requests) != 3 {
		t.Fatalf("%d requests, want 3 pages of at most 500", len(s.requests))
	}
	for i, wantCont := range []string{"", "500", "1000"} {
		r := s.requests[i]
		if r.Limit != pageSize || r.Continue != wantCont || r.Namespace != "ns" {
			t.Errorf("request %d: limit %d continue %q namespace %q", i, r.Limit, r.Continue, r.Namespace)
		}
	}
}

// Against the plain fake client (which ignores Limit) every object still comes back once.
func TestListAllWithoutPaging(t *testing.T) {
	a, b := batch("a"), batch("b")
	other := *b.DeepCopy()
	other.Namespace = "elsewhere"
	c := fakeClient(&a, &b, &other)
	got, err := listBatches(context.Background(), c)
	if err != nil || len(got) != 3 {
		t.Errorf("all namespaces: %d batches, %v", len(got), err)
	}
	ev := corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e"}}
	events, err := listEvents(context.Background(), fakeClient(&ev), client.InNamespace("ns"))
	if err != nil || len(events) != 1 {
		t.Errorf("events: %d, %v", len(events), err)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{notWanted("x"), ExitNotWanted},
		{fmt.Errorf("wrapped: %w", timedOut("y")), ExitTimeout},
		{fmt.Errorf("plain"), ExitError},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	if _, _, code := run(t, fakeClient(), "", "status", "-o", "wide"); code != ExitError {
		t.Errorf("-o wide: exit %d, want %d", code, ExitError)
	}
	if _, _, code := run(t, fakeClient(), "", "no-such-command"); code != ExitError {
		t.Errorf("unknown command: exit %d, want %d", code, ExitError)
	}
}
