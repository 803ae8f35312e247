package plugin

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// waitFor is what --for asks: some phases of one batch, or the placement of many.
type waitFor struct {
	placement bool
	phases    []sealv1.SealBatchPhase
}

// parseWaitFor reads --for: "placement", or "phase=" and a comma-separated list of phases.
func parseWaitFor(s string) (waitFor, error) {
	if s == "placement" {
		return waitFor{placement: true}, nil
	}
	list, ok := strings.CutPrefix(s, "phase=")
	if !ok || list == "" {
		return waitFor{}, fmt.Errorf("--for %q: give phase=PHASE[,PHASE...] (e.g. phase=Completed,WaitingForSeeds) or placement", s)
	}
	var w waitFor
	for _, p := range strings.Split(list, ",") {
		if !isKnownPhase(p) {
			return waitFor{}, fmt.Errorf("--for: %q is not a SealBatch phase; the phases are %s", p, phaseList())
		}
		w.phases = append(w.phases, sealv1.SealBatchPhase(p))
	}
	return w, nil
}

func phaseList() string {
	s := make([]string, len(allPhases))
	for i, p := range allPhases {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// verdict is what one look at a batch says about the wait.
type verdict int

const (
	keepWaiting verdict = iota
	// reached: the batch is in a wanted phase.
	reached
	// unreachable: the batch is in a phase it never leaves, and it is not wanted.
	unreachable
)

// judgePhase decides a per-batch wait. Completed and Failed are final (a failed batch's
// retries happen before it is Failed); every other phase may still move on.
func judgePhase(phase sealv1.SealBatchPhase, wanted []sealv1.SealBatchPhase) verdict {
	for _, w := range wanted {
		if phase == w {
			return reached
		}
	}
	if phase.Final() {
		return unreachable
	}
	return keepWaiting
}

// shownState is the line wait prints when it changes: phase, the sealer's own phase,
// layer and percent, and for Pending and Failed the status message (why it waits or failed).
func shownState(b *sealv1.SealBatch) string {
	phase := phaseOf(b)
	s := "phase " + string(phase)
	if p := b.Status.Progress; p != nil {
		if p.Phase != "" {
			s += "  sealer " + p.Phase
		}
		if p.Layer != 0 {
			s += fmt.Sprintf("  layer %d/%d", p.Layer, p.Layers)
		}
		if p.Percent != "" {
			s += "  " + p.Percent + "%"
		}
	}
	if (phase == sealv1.PhasePending || phase == sealv1.PhaseFailed) && b.Status.Message != "" {
		s += "  (" + b.Status.Message + ")"
	}
	return s
}

// PlacementCount is how far a set of batches is placed.
type PlacementCount struct {
	Total, Placed, Pending int
	// Explained are the unplaced batches that are Pending with a status.message saying why.
	Explained int
}

// CountPlacement counts placed batches (status.node set) and unplaced ones, and among those
// the Pending ones that say why they wait.
func CountPlacement(batches []sealv1.SealBatch) PlacementCount {
	c := PlacementCount{Total: len(batches)}
	for i := range batches {
		b := &batches[i]
		switch {
		case b.Status.Node != "":
			c.Placed++
		default:
			c.Pending++
			if phaseOf(b) == sealv1.PhasePending && b.Status.Message != "" {
				c.Explained++
			}
		}
	}
	return c
}

// Done is true when every batch is placed or explained (and there is at least one: a
// selector matching nothing yet is more likely early than done).
func (c PlacementCount) Done() bool { return c.Total > 0 && c.Placed+c.Explained == c.Total }

func (c PlacementCount) String() string {
	return fmt.Sprintf("%d batches: %d placed, %d pending (%d with a reason)", c.Total, c.Placed, c.Pending, c.Explained)
}

// waiter polls until its check says done or the deadline passes, printing each change of
// what it shows to errOut with the seconds since it started.
type waiter struct {
	out, errOut io.Writer
	now         func() time.Time
	interval    time.Duration
	timeout     time.Duration
	start       time.Time
	last        string
}

func (w *waiter) show(line string) {
	if line == w.last {
		return
	}
	w.last = line
	fmt.Fprintf(w.errOut, "%6s  %s\n", fmt.Sprintf("%ds", int(w.now().Sub(w.start).Seconds())), line)
}

// poll runs check every interval; check returns done, or an error that ends the wait.
func (w *waiter) poll(ctx context.Context, check func(first bool) (bool, error)) (timedOut bool, err error) {
	w.start = w.now()
	for first := true; ; first = false {
		done, err := check(first)
		if done || err != nil {
			return false, err
		}
		if w.now().Sub(w.start) >= w.timeout {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("interrupted while waiting: %w", ctx.Err())
		case <-time.After(w.interval):
		}
	}
}

// waitBatch follows one batch until it reaches a wanted phase or one it never leaves.
func (w *waiter) waitBatch(ctx context.Context, c client.Reader, ns, name string, wanted []sealv1.SealBatchPhase) error {
	var b *sealv1.SealBatch
	var verdictSeen verdict
	var lastErr string
	timedOutNow, err := w.poll(ctx, func(first bool) (bool, error) {
		got := &sealv1.SealBatch{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got)
		switch {
		case err != nil && first:
			_, err = getBatch(ctx, c, ns, name) // the same error, worded for the user
			return false, err
		case apierrors.IsNotFound(err):
			return false, notWanted("SealBatch %s/%s was deleted while waiting for it", ns, name)
		case err != nil:
			// Keep polling through a blip in the API; say so once per distinct error.
			if err.Error() != lastErr {
				lastErr = err.Error()
				fmt.Fprintf(w.errOut, "reading SealBatch %s/%s: %v (retrying)\n", ns, name, err)
			}
			return false, nil
		}
		b = got
		w.show(shownState(b))
		verdictSeen = judgePhase(phaseOf(b), wanted)
		return verdictSeen != keepWaiting, nil
	})
	if err != nil {
		return err
	}
	elapsed := w.now().Sub(w.start).Round(time.Second)
	switch {
	case timedOutNow:
		phase := "unread"
		if b != nil {
			phase = string(phaseOf(b))
		}
		return timedOut("SealBatch %s/%s is still %s after %s (timeout): --timeout waits longer", ns, name, phase, elapsed)
	case verdictSeen == unreachable:
		writeFailure(w.errOut, b)
		return notWanted("SealBatch %s/%s is %s and will stay so, not %s", ns, name, phaseOf(b), joinPhases(wanted))
	}
	fmt.Fprintf(w.out, "SealBatch %s/%s is %s (after %s)\n", ns, name, phaseOf(b), elapsed)
	return nil
}

// writeFailure prints why a batch ended where it did: its message and conditions.
func writeFailure(w io.Writer, b *sealv1.SealBatch) {
	if b.Status.Message != "" {
		fmt.Fprintf(w, "message: %s\n", b.Status.Message)
	}
	if len(b.Status.Conditions) == 0 {
		return
	}
	t := newTable(w, false)
	t.header("CONDITION", "STATUS", "REASON", "MESSAGE")
	for _, c := range b.Status.Conditions {
		t.row(c.Type, string(c.Status), c.Reason, c.Message)
	}
	_ = t.flush()
}

func joinPhases(ps []sealv1.SealBatchPhase) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, " or ")
}

// waitPlacement follows the selected batches until each is placed or explained.
func (w *waiter) waitPlacement(ctx context.Context, c client.Reader, opts []client.ListOption) error {
	var count PlacementCount
	var lastErr string
	timedOutNow, err := w.poll(ctx, func(first bool) (bool, error) {
		batches, err := listBatches(ctx, c, opts...)
		switch {
		case err != nil && first:
			return false, err
		case err != nil:
			if err.Error() != lastErr {
				lastErr = err.Error()
				fmt.Fprintf(w.errOut, "%v (retrying)\n", err)
			}
			return false, nil
		}
		count = CountPlacement(batches)
		w.show(count.String())
		return count.Done(), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(w.out, count.String())
	if timedOutNow {
		return timedOut("not every batch placed or explained after %s (timeout): --timeout waits longer", w.now().Sub(w.start).Round(time.Second))
	}
	return nil
}

func (a *app) waitCommand() *cobra.Command {
	var forFlag, selector string
	var allNamespaces bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait (NAME --for phase=PHASE[,PHASE...] | -l SELECTOR --for placement)",
		Short: "Wait for a batch to reach a phase, or for batches to be placed",
		Long: `Wait for one SealBatch to reach one of the given phases, polling every second and
printing to stderr each change of its phase and progress:
   12s  phase PC1  sealer pc1  layer 2/2  45%
Exits 0 when the phase is one of those asked for; 1 as soon as the batch is in a phase it
never leaves that was not asked for (Failed, or Completed), printing status.message and
the conditions; 2 when --timeout passes first.

With -l and --for placement: wait until every selected batch is placed (status.node set) or
Pending with a status.message saying why, then print
  N batches: P placed, Q pending (R with a reason)
A timeout prints the same line and exits 2.`,
		Example: `  kubectl sealfleet wait -n sealfleet-batches cc-8mib --for phase=Completed,WaitingForSeeds
  kubectl sealfleet wait -n sealfleet-batches -l sealfleet.io/demo=backlog --for placement --timeout 2m`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := parseWaitFor(forFlag)
			if err != nil {
				return err
			}
			switch {
			case target.placement && (selector == "" || len(args) > 0):
				return fmt.Errorf("--for placement waits on the batches -l selects: give -l SELECTOR and no NAME")
			case !target.placement && (len(args) != 1 || selector != ""):
				return fmt.Errorf("--for phase=... waits on one batch: give its NAME (and no -l)")
			case timeout <= 0:
				return fmt.Errorf("--timeout %s: give a positive duration such as 15m", timeout)
			}
			c, ns, err := a.namespacedClient()
			if err != nil {
				return err
			}
			w := &waiter{out: a.env.Out, errOut: a.env.Err, now: a.env.Now, interval: a.env.PollInterval, timeout: timeout}
			if !target.placement {
				return w.waitBatch(cmd.Context(), c, ns, args[0], target.phases)
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("-l %q: %w", selector, err)
			}
			opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
			if !allNamespaces {
				opts = append(opts, client.InNamespace(ns))
			}
			return w.waitPlacement(cmd.Context(), c, opts)
		},
	}
	cmd.Flags().StringVar(&forFlag, "for", "", "phase=PHASE[,PHASE...] (one batch) or placement (with -l)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector of the batches to wait for (with --for placement)")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "select batches in every namespace (with -l)")
	cmd.Flags().DurationVar(&timeout, "timeout", 15*time.Minute, "give up after this long (exit 2)")
	_ = cmd.MarkFlagRequired("for")
	return cmd
}
