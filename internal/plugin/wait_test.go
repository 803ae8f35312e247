package plugin

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

func TestParseWaitFor(t *testing.T) {
	w, err := parseWaitFor("phase=Completed,WaitingForSeeds")
	if err != nil || w.placement || !reflect.DeepEqual(w.phases, []sealv1.SealBatchPhase{sealv1.PhaseCompleted, sealv1.PhaseWaitingForSeeds}) {
		t.Errorf("phase list: %+v %v", w, err)
	}
	if w, err := parseWaitFor("placement"); err != nil || !w.placement {
		t.Errorf("placement: %+v %v", w, err)
	}
	for _, bad := range []string{"", "phase=", "phase=Done", "Completed", "condition=Ready"} {
		if _, err := parseWaitFor(bad); err == nil {
			t.Errorf("--for %q accepted", bad)
		}
	}
}

func TestJudgePhase(t *testing.T) {
	completed := []sealv1.SealBatchPhase{sealv1.PhaseCompleted}
	seedsOrDone := []sealv1.SealBatchPhase{sealv1.PhaseCompleted, sealv1.PhaseWaitingForSeeds}
	for _, tc := range []struct {
		phase  sealv1.SealBatchPhase
		wanted []sealv1.SealBatchPhase
		want   verdict
	}{
		{sealv1.PhasePending, completed, keepWaiting},
		{sealv1.PhasePC1, completed, keepWaiting},
		{sealv1.PhaseWaitingForSeeds, completed, keepWaiting},
		{sealv1.PhaseWaitingForSeeds, seedsOrDone, reached},
		{sealv1.PhaseCompleted, completed, reached},
		{sealv1.PhaseFailed, completed, unreachable},
		{sealv1.PhaseCompleted, []sealv1.SealBatchPhase{sealv1.PhaseWaitingForSeeds}, unreachable},
		{sealv1.PhaseFailed, []sealv1.SealBatchPhase{sealv1.PhaseFailed}, reached},
		{sealv1.PhasePending, []sealv1.SealBatchPhase{sealv1.PhasePlaced}, keepWaiting},
	} {
		if got := judgePhase(tc.phase, tc.wanted); got != tc.want {
			t.Errorf("phase %s, wanted %v: verdict %d, want %d", tc.phase, tc.wanted, got, tc.want)
		}
	}
}

func TestShownState(t *testing.T) {
	b := batch("b", placedAt("n1", 0, sealv1.PhasePC1, 0), func(b *sealv1.SealBatch) {
		b.Status.Progress = &sealv1.Progress{Phase: "pc1", Layer: 2, Layers: 2, Percent: "45"}
		b.Status.Message = "labelling"
	})
	if got := shownState(&b); got != "phase PC1  sealer pc1  layer 2/2  45%" {
		t.Errorf("PC1: %q", got)
	}
	p := batch("p", pendingWith("no node has a free slot"))
	if got := shownState(&p); got != "phase Pending  (no node has a free slot)" {
		t.Errorf("Pending: %q", got)
	}
	if n := batch("n"); shownState(&n) != "phase Pending" {
		t.Errorf("no phase yet: %q", shownState(&n))
	}
}

func TestCountPlacement(t *testing.T) {
	batches := []sealv1.SealBatch{
		batch("a", placedAt("n1", 0, sealv1.PhasePC1, 0)),
		batch("b", placedAt("n1", 1, sealv1.PhaseCompleted, 0)),
		batch("c", pendingWith("no node with 8 free cores")),
		batch("d"), // not looked at yet
		batch("e", func(b *sealv1.SealBatch) { b.Status.Phase, b.Status.Message = sealv1.PhaseFailed, "bad spec" }),
	}
	c := CountPlacement(batches)
	if want := (PlacementCount{Total: 5, Placed: 2, Pending: 3, Explained: 1}); c != want {
		t.Errorf("count %+v, want %+v", c, want)
	}
	if c.Done() {
		t.Error("done with an unexplained pending batch")
	}
	if c.String() != "5 batches: 2 placed, 3 pending (1 with a reason)" {
		t.Errorf("summary %q", c.String())
	}
	if !CountPlacement(batches[:3]).Done() || CountPlacement(nil).Done() {
		t.Error("placed + explained must be done; nothing selected must not")
	}
}

// realClock runs wait against the fake client with a real clock and a short timeout.
func realClock(c client.Client) Env { return Env{Client: c, Now: time.Now} }

func TestWaitBatch(t *testing.T) {
	done := batch("done", placedAt("n1", 0, sealv1.PhaseCompleted, 0))
	failed := batch("failed", placedAt("n1", 1, sealv1.PhaseFailed, 0), func(b *sealv1.SealBatch) {
		b.Status.Message = "sealer exited 4: no SHA-NI"
		b.Status.Conditions = []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue, Reason: "NoSHANI", Message: "CPU lacks sha_ni"}}
	})
	seeds := batch("seeds", placedAt("n2", 0, sealv1.PhaseWaitingForSeeds, 0))
	running := batch("running", placedAt("n3", 0, sealv1.PhasePC1, 0), func(b *sealv1.SealBatch) {
		b.Status.Progress = &sealv1.Progress{Phase: "pc1", Layer: 1, Layers: 2, Percent: "12.5"}
	})
	c := fakeClient(&done, &failed, &seeds, &running)

	out, errOut, code := runEnv(t, realClock(c), "wait", "done", "--for", "phase=Completed", "--timeout", "5s")
	if code != 0 || !strings.Contains(out, "SealBatch ns/done is Completed") || !strings.Contains(errOut, "0s  phase Completed") {
		t.Errorf("completed: exit %d %q %q", code, out, errOut)
	}
	_, errOut, code = runEnv(t, realClock(c), "wait", "failed", "--for", "phase=Completed", "--timeout", "5s")
	if code != ExitNotWanted || !strings.Contains(errOut, "message: sealer exited 4: no SHA-NI") || !strings.Contains(errOut, "CPU lacks sha_ni") ||
		!strings.Contains(errOut, "SealBatch ns/failed is Failed and will stay so, not Completed") {
		t.Errorf("failed: exit %d %q", code, errOut)
	}
	_, _, code = runEnv(t, realClock(c), "wait", "seeds", "--for", "phase=Completed,WaitingForSeeds", "--timeout", "5s")
	if code != 0 {
		t.Errorf("WaitingForSeeds wanted: exit %d", code)
	}
	_, errOut, code = runEnv(t, realClock(c), "wait", "done", "--for", "phase=WaitingForSeeds", "--timeout", "5s")
	if code != ExitNotWanted {
		t.Errorf("Completed but WaitingForSeeds wanted: exit %d %q", code, errOut)
	}
	_, errOut, code = runEnv(t, realClock(c), "wait", "running", "--for", "phase=Completed", "--timeout", "30ms")
	if code != ExitTimeout || !strings.Contains(errOut, "is still PC1 after") ||
		strings.Count(errOut, "phase PC1  sealer pc1  layer 1/2  12.5%") != 1 {
		t.Errorf("timeout: exit %d %q", code, errOut)
	}
	_, errOut, code = runEnv(t, realClock(c), "wait", "nope", "--for", "phase=Completed", "--timeout", "5s")
	if code != ExitError || !strings.Contains(errOut, "SealBatch ns/nope not found") {
		t.Errorf("unknown batch: exit %d %q", code, errOut)
	}
	_, _, code = runEnv(t, realClock(c), "wait", "done", "--for", "placement")
	if code != ExitError {
		t.Errorf("--for placement with a NAME: exit %d, want usage error", code)
	}
}

// The wait follows the batch through its phases, printing each change once.
func TestWaitBatchFollowsChanges(t *testing.T) {
	b := batch("b", placedAt("n1", 0, sealv1.PhasePlaced, 0))
	phases := []sealv1.SealBatchPhase{sealv1.PhasePlaced, sealv1.PhasePlaced, sealv1.PhasePC1, sealv1.PhasePC2, sealv1.PhaseCompleted}
	var reads atomic.Int32
	c := fakeClientWith(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		i := min(int(reads.Add(1))-1, len(phases)-1)
		obj.(*sealv1.SealBatch).Status.Phase = phases[i]
		return nil
	}}, &b)
	out, errOut, code := runEnv(t, realClock(c), "wait", "b", "--for", "phase=Completed", "--timeout", "5s")
	if code != 0 || !strings.Contains(out, "is Completed") {
		t.Fatalf("exit %d %q %q", code, out, errOut)
	}
	var shown []string
	for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
		shown = append(shown, strings.TrimSpace(l[strings.Index(l, "s  ")+1:]))
	}
	if want := []string{"phase Placed", "phase PC1", "phase PC2", "phase Completed"}; !reflect.DeepEqual(shown, want) {
		t.Errorf("lines shown %q, want %q", shown, want)
	}
}

func TestWaitPlacement(t *testing.T) {
	label := func(b *sealv1.SealBatch) { b.Labels = map[string]string{"demo": "backlog"} }
	placed := batch("placed", label, placedAt("n1", 0, sealv1.PhasePC1, 0))
	explained := batch("explained", label, pendingWith("no node has 64 free cores"))
	other := batch("other") // not selected
	c := fakeClient(&placed, &explained, &other)
	out, _, code := runEnv(t, realClock(c), "wait", "-l", "demo=backlog", "--for", "placement", "--timeout", "5s")
	if code != 0 || out != "2 batches: 1 placed, 1 pending (1 with a reason)\n" {
		t.Errorf("placement: exit %d %q", code, out)
	}

	silent := batch("silent", label)
	c = fakeClient(&placed, &silent)
	out, errOut, code := runEnv(t, realClock(c), "wait", "-l", "demo=backlog", "--for", "placement", "--timeout", "20ms")
	if code != ExitTimeout || out != "2 batches: 1 placed, 1 pending (0 with a reason)\n" || !strings.Contains(errOut, "timeout") {
		t.Errorf("placement timeout: exit %d %q %q", code, out, errOut)
	}
}
