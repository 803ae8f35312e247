package plugin

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// recentEvents is how many of a batch's events `batch` shows.
const recentEvents = 10

// BatchReport is `batch -o json|yaml`: the SealBatch and its recent events.
type BatchReport struct {
	Batch  *sealv1.SealBatch `json:"batch"`
	Events []EventSummary    `json:"events"`
}

// EventSummary is one event about the batch.
type EventSummary struct {
	Time    metav1.Time `json:"time"`
	Type    string      `json:"type"`
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
	Count   int32       `json:"count,omitempty"`
}

// eventTime is when an event last happened, whichever of its time fields its writer set.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// RecentEvents keeps the last n events, oldest first.
func RecentEvents(events []corev1.Event, n int) []EventSummary {
	out := make([]EventSummary, 0, len(events))
	for i := range events {
		e := &events[i]
		out = append(out, EventSummary{Time: metav1.NewTime(eventTime(e)), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(&out[j].Time) })
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// ofObject drops events about an earlier object of the same name (deleted and created again).
func ofObject(events []corev1.Event, uid types.UID) []corev1.Event {
	out := events[:0:0]
	for _, e := range events {
		if e.InvolvedObject.UID == "" || e.InvolvedObject.UID == uid {
			out = append(out, e)
		}
	}
	return out
}

// progressText is status.progress on one line.
func progressText(p *sealv1.Progress) string {
	if p == nil {
		return ""
	}
	var parts []string
	if p.Phase != "" {
		parts = append(parts, "sealer "+p.Phase)
	}
	switch {
	case p.Layer != 0 && p.Phase == "proofs": // SyntheticPoRep's proofs count sectors
		parts = append(parts, fmt.Sprintf("sector %d/%d", p.Layer, p.Layers))
	case p.Layer != 0:
		parts = append(parts, fmt.Sprintf("layer %d/%d", p.Layer, p.Layers))
	}
	if p.Percent != "" {
		parts = append(parts, p.Percent+"%")
	}
	if p.LabelsPerSecond != 0 {
		parts = append(parts, fmt.Sprintf("%d labels/s", p.LabelsPerSecond))
	}
	if p.ETASeconds != 0 {
		parts = append(parts, "ETA "+(time.Duration(p.ETASeconds)*time.Second).String())
	}
	return strings.Join(parts, "  ")
}

// writeBatch prints a batch as `batch` shows it: its state, conditions, sectors and events.
func writeBatch(w io.Writer, b *sealv1.SealBatch, events []EventSummary, now time.Time, noHeaders bool) error {
	slot := ""
	if b.Status.Slot != nil {
		slot = fmt.Sprint(*b.Status.Slot)
	}
	head := newTable(w, false)
	head.row("SealBatch", b.Namespace+"/"+b.Name)
	head.row("Phase", string(phaseOf(b)))
	head.row("Node", b.Status.Node)
	head.row("Slot", slot)
	head.row("Attempts", fmt.Sprint(b.Status.Attempts))
	head.row("Message", b.Status.Message)
	head.row("Progress", progressText(b.Status.Progress))
	head.row("Predicted", predictionText(b.Status.Prediction))
	if err := head.flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	conds := newTable(w, noHeaders)
	conds.header("CONDITION", "STATUS", "REASON", "MESSAGE")
	for _, c := range b.Status.Conditions {
		conds.row(c.Type, string(c.Status), c.Reason, c.Message)
	}
	if err := conds.flush(); err != nil {
		return err
	}

	// Every sector of the spec, with its results once the status has them.
	results := map[int64]sealv1.SectorStatus{}
	for _, s := range b.Status.Sectors {
		results[s.Number] = s
	}
	update := b.Spec.IsUpdate()
	fmt.Fprintln(w)
	sectors := newTable(w, noHeaders)
	cols := []string{"SECTOR", "STATE", "COMMR", "COMMRCID", "COMMDCID"}
	if update {
		cols = append(cols, "COMMROLD")
	}
	sectors.header(cols...)
	var reasons []string
	for _, sp := range b.Spec.Sectors {
		r := results[sp.Number]
		cells := []string{fmt.Sprint(sp.Number), r.State, r.CommR, r.CommRCID, r.CommDCID}
		if update {
			cells = append(cells, r.CommROld)
		}
		sectors.row(cells...)
		if r.Reason != "" {
			reasons = append(reasons, fmt.Sprintf("sector %d (%s): %s", sp.Number, r.State, r.Reason))
		}
	}
	if err := sectors.flush(); err != nil {
		return err
	}
	for _, line := range reasons {
		fmt.Fprintln(w, line)
	}

	fmt.Fprintln(w)
	if len(events) == 0 {
		fmt.Fprintln(w, "no events for this batch (events expire after an hour by default)")
		return nil
	}
	ev := newTable(w, noHeaders)
	ev.header("LAST SEEN", "TYPE", "REASON", "MESSAGE")
	for _, e := range events {
		ev.row(age(now.Sub(e.Time.Time)), e.Type, e.Reason, e.Message)
	}
	return ev.flush()
}

func (a *app) batchCommand() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "batch NAME",
		Short: "One SealBatch: phase, node, slot, progress, conditions, sectors, recent events",
		Long: `One SealBatch in detail: phase, node, slot, attempts, message, the sealer's progress,
the conditions, one row per sector (state, commR, commR and commD as CIDs; commROld for an
update) and the batch's last 10 events.

-o json or -o yaml prints {batch: <the SealBatch>, events: [...]}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, ns, b, err := a.batchNamed(ctx, args[0])
			if err != nil {
				return err
			}
			evs, err := listEvents(ctx, c, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{
				"involvedObject.kind": "SealBatch",
				"involvedObject.name": b.Name,
			})})
			if err != nil {
				return err
			}
			events := RecentEvents(ofObject(evs, b.UID), recentEvents)
			if out.format != "" {
				b.APIVersion, b.Kind = sealv1.GroupVersion.String(), "SealBatch"
				b.ManagedFields = nil
				return out.print(a.env.Out, BatchReport{Batch: b, Events: events})
			}
			return writeBatch(a.env.Out, b, events, a.env.Now(), out.noHeaders)
		},
	}
	out.add(cmd, "json", "yaml")
	return cmd
}
