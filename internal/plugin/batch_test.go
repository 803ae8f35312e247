package plugin

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

func event(name, kind, object string, uid types.UID, at time.Duration, reason string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "ns", Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: object, Namespace: "ns", UID: uid},
		LastTimestamp:  *ago(at),
		Type:           corev1.EventTypeNormal,
		Reason:         reason,
		Message:        reason + " happened",
	}
}

func TestRecentEvents(t *testing.T) {
	var evs []corev1.Event
	for i := 0; i < 12; i++ {
		// Out of order: the 12 events happened i minutes ago.
		evs = append(evs, *event(fmt.Sprint(i), "SealBatch", "b", "", time.Duration((i*7)%12)*time.Minute, fmt.Sprintf("R%d", (i*7)%12)))
	}
	got := RecentEvents(evs, 10)
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, e.Reason)
	}
	// The 10 most recent, oldest first: 9 minutes ago down to now.
	if want := []string{"R9", "R8", "R7", "R6", "R5", "R4", "R3", "R2", "R1", "R0"}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("recent events %q, want %q", reasons, want)
	}
}

func TestBatchCommand(t *testing.T) {
	b := batch("b", placedAt("n1", 1, sealv1.PhasePC2, time.Hour), func(b *sealv1.SealBatch) {
		b.Status.Attempts = 2
		b.Status.Message = "PC2 running"
		b.Status.Progress = &sealv1.Progress{Phase: "pc2", Percent: "80", ETASeconds: 90}
		b.Status.Conditions = []metav1.Condition{{Type: "Placed", Status: metav1.ConditionTrue, Reason: "SlotFree", Message: "slot 1 of n1"}}
		b.Status.Sectors = []sealv1.SectorStatus{{Number: 100, State: "Sealed", CommR: "aa", CommRCID: "bagboea4b5abcx", CommDCID: "baga6ea4seaqy"}}
	})
	c := fakeClient(&b,
		event("e1", "SealBatch", "b", b.UID, 50*time.Minute, "Placed"),
		event("e2", "SealBatch", "b", b.UID, 2*time.Minute, "PC2Started"),
		event("e3", "SealBatch", "other", "", time.Minute, "NotMine"),
		event("e4", "Pod", "b", "", time.Minute, "PodEvent"),
		event("e5", "SealBatch", "b", "uid-of-an-earlier-b", time.Minute, "EarlierBatch"),
	)
	out, errOut, code := run(t, c, "", "batch", "b")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"ns/b", "PC2", "n1", "Attempts", "PC2 running", "sealer pc2  80%  ETA 1m30s", "slot 1 of n1", "PC2Started happened"} {
		if !strings.Contains(out, want) {
			t.Errorf("batch output lacks %q:\n%s", want, out)
		}
	}
	rows := splitRows(out)
	var sectors [][]string
	for _, r := range rows {
		if len(r) > 0 && (r[0] == "100" || r[0] == "101") {
			sectors = append(sectors, r)
		}
	}
	if want := [][]string{{"100", "Sealed", "aa", "bagboea4b5abcx", "baga6ea4seaqy"}, {"101", "-", "-", "-", "-"}}; !reflect.DeepEqual(sectors, want) {
		t.Errorf("sector rows %q, want %q", sectors, want)
	}
	for _, never := range []string{"NotMine", "PodEvent", "EarlierBatch", "COMMROLD"} {
		if strings.Contains(out, never) {
			t.Errorf("batch output shows %s:\n%s", never, out)
		}
	}

	out, _, code = run(t, c, "", "batch", "b", "-o", "json")
	var report BatchReport
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 {
		t.Fatalf("-o json (exit %d): %v\n%s", code, err, out)
	}
	if report.Batch.Kind != "SealBatch" || report.Batch.Status.Node != "n1" || len(report.Events) != 2 || report.Events[1].Reason != "PC2Started" {
		t.Errorf("-o json: %+v", report)
	}

	_, errOut, code = run(t, c, "", "batch", "b", "-n", "elsewhere")
	if code != ExitError || !strings.Contains(errOut, "SealBatch elsewhere/b not found: kubectl get sealbatches -A lists them") {
		t.Errorf("wrong namespace: exit %d %q", code, errOut)
	}
}
