package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

// C1 from the slot (spec.commit1 FromSlot), one sector at a time: after PC2 the batch holds its
// slot (phase WaitingForSeeds); as seeds arrive, a C1 pod (phase C1) reads the labels the
// seeded sectors' challenges open from the slot and writes their commit-phase1-outputs, so a
// partner's commit1 never waits for another sector's seed. Seeds that arrive while a pod runs
// go to the next one. The batch completes (and its release policy applies) once every sector
// has its output, failed it, was abandoned by its owner, or had no seed by seedTimeout.

// Sector states of C1 (status.sectors[].state).
const (
	stateC1Written   = "C1Written"
	stateC1Failed    = "C1Failed"
	stateSeedMissing = "SeedMissing"
	stateAbandoned   = "Abandoned"
	// stateFailed: the sealer left the sector out (a check of its own failed); the batch
	// sealed the others.
	stateFailed = "Failed"
)

// c1Settled: the sector needs no C1 run any more (and none reads its cache).
func c1Settled(state string) bool {
	switch state {
	case stateC1Written, stateC1Failed, stateSeedMissing, stateAbandoned, stateFailed:
		return true
	}
	return false
}

// c1SectorsAnnotation lists the sectors a C1 pod writes, so that a failed run fails those.
const c1SectorsAnnotation = "sealfleet.io/c1-sectors"

// c1Pending is the seeds whose sectors have no C1 outcome yet and are not abandoned.
func c1Pending(b *sealv1.SealBatch) []sealv1.SectorSeed {
	settled := map[int64]bool{}
	for _, s := range b.Status.Sectors {
		settled[s.Number] = c1Settled(s.State)
	}
	var out []sealv1.SectorSeed
	for _, s := range b.Spec.Seeds {
		if !settled[s.Number] && !slices.Contains(b.Spec.AbandonedSectors, s.Number) {
			out = append(out, s)
		}
	}
	return out
}

// c1Waiting is the sectors with no C1 outcome, no seed and not abandoned.
func c1Waiting(b *sealv1.SealBatch) []int64 {
	var out []int64
	for _, s := range b.Status.Sectors {
		if !c1Settled(s.State) && !slices.Contains(b.Spec.AbandonedSectors, s.Number) &&
			!slices.ContainsFunc(b.Spec.Seeds, func(x sealv1.SectorSeed) bool { return x.Number == s.Number }) {
			out = append(out, s.Number)
		}
	}
	return out
}

// toWaitingForSeeds records PC2's results of a FromSlot batch and starts the wait for seeds.
func (r *SealerReconciler) toWaitingForSeeds(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod, res *Results) error {
	deadline := metav1.NewTime(time.Now().Add(b.Spec.SeedWait()))
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.Phase = sealv1.PhaseWaitingForSeeds
		b.Status.Sectors = res.toStatus()
		res.recordMeasured(b)
		b.Status.SeedDeadline = &deadline
		if b.Status.Progress != nil {
			b.Status.Progress.Percent = "100"
			b.Status.Progress.ETASeconds = 0
		}
		msg := seedsMessage(b, &deadline)
		setCondition(b, sealv1.CondPC1Complete, metav1.ConditionTrue, sealv1.ReasonLayersWritten, "all layers written")
		setCondition(b, sealv1.CondPC2Complete, metav1.ConditionTrue, sealv1.ReasonCommitted, fmt.Sprintf("%d sectors sealed", len(res.Sectors)))
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonWaitingForSeeds, msg)
		b.Status.Message = msg
		recordSectorFailures(b, res)
	}, func(b *sealv1.SealBatch) {
		metricBatchTransitions.WithLabelValues(string(sealv1.PhaseWaitingForSeeds)).Inc()
		r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, string(sealv1.ReasonWaitingForSeeds), "Seal", "%s", b.Status.Message)
		r.sectorFailuresSeen(b, pod, res)
	})
}

func seedsMessage(b *sealv1.SealBatch, deadline *metav1.Time) string {
	written := 0
	for _, s := range b.Status.Sectors {
		if s.State == stateC1Written {
			written++
		}
	}
	msg := fmt.Sprintf("PC2 done; the slot is held for C1, which runs for each sector as its seed arrives in spec.seeds (%d/%d given, %d C1 outputs written)",
		len(b.Spec.Seeds), len(b.Spec.Sectors), written)
	if n := len(b.Spec.AbandonedSectors); n > 0 {
		msg += fmt.Sprintf(", %d abandoned", n)
	}
	return msg + ", until every sector is done or " + deadline.UTC().Format(time.RFC3339)
}

// awaitSeeds runs C1 for the seeds that have arrived, marks abandoned sectors, and completes
// the batch once no sector waits any more (or the deadline passed).
func (r *SealerReconciler) awaitSeeds(ctx context.Context, b *sealv1.SealBatch, at attemptTarget) (reconcile.Result, error) {
	deadline := b.Status.SeedDeadline
	if deadline == nil {
		d := metav1.NewTime(time.Now().Add(b.Spec.SeedWait()))
		deadline = &d
	}
	if abandoned := unmarkedAbandoned(b); len(abandoned) > 0 {
		return reconcile.Result{}, updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
			if b.Status.Phase == sealv1.PhaseWaitingForSeeds { // a running C1 pod may write them: c1RunWritten marks them after
				markAbandoned(b)
			}
		}, func(b *sealv1.SealBatch) {
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "SectorsAbandoned", "Seal", "sectors %s abandoned by their owner: no C1 for them; the slot goes back once the others are done", joinNumbers(abandoned))
		})
	}
	if pending := c1Pending(b); len(pending) > 0 {
		return r.startStep(ctx, b, at, render.StepC1, b.Status.C1Attempts+1)
	}
	wait := time.Until(deadline.Time)
	if len(c1Waiting(b)) == 0 || wait <= 0 {
		return reconcile.Result{}, r.finishC1(ctx, b)
	}
	msg := seedsMessage(b, deadline)
	if b.Status.Message == msg && b.Status.SeedDeadline != nil {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	return reconcile.Result{RequeueAfter: wait}, updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.SeedDeadline = deadline
		b.Status.Message = msg
		reason := sealv1.ReasonWaitingForSeeds
		if c := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondC1Complete); c != nil && c.Reason == string(sealv1.ReasonC1Written) {
			reason = sealv1.ReasonC1Written // some outputs are written; the rest wait
		}
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, reason, msg)
	}, nil)
}

// unmarkedAbandoned is the abandoned sectors with no C1 outcome whose state does not say so
// yet (one whose C1 was written or failed keeps that state).
func unmarkedAbandoned(b *sealv1.SealBatch) []int64 {
	var out []int64
	for _, s := range b.Status.Sectors {
		if slices.Contains(b.Spec.AbandonedSectors, s.Number) && !c1Settled(s.State) {
			out = append(out, s.Number)
		}
	}
	return out
}

func markAbandoned(b *sealv1.SealBatch) {
	for i := range b.Status.Sectors {
		if s := &b.Status.Sectors[i]; slices.Contains(b.Spec.AbandonedSectors, s.Number) && !c1Settled(s.State) {
			s.State, s.Reason = stateAbandoned, "its owner gave up on it (spec.abandonedSectors): no C1, outputs deleted"
		}
	}
}

// runC1 follows the running C1 pod: its sectors' outputs when it succeeds, the next run or
// those sectors' failure when it fails; then back to waiting for the other seeds.
func (r *SealerReconciler) runC1(ctx context.Context, b *sealv1.SealBatch, at attemptTarget) (reconcile.Result, error) {
	var pod corev1.Pod
	err := r.getPod(ctx, b, r.Pod.Home.C1PodName(b, b.Status.C1Attempts), &pod)
	if apierrors.IsNotFound(err) {
		return r.c1RunFailed(ctx, b, at, nil, sealv1.ReasonPodDisappeared, "the C1 pod was deleted before it finished", true)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		res, err := readResults(ctx, r.Results, &pod)
		if err != nil {
			return r.c1RunFailed(ctx, b, at, &pod, sealv1.ReasonSealerFailed, "C1 exited 0 but its results are unreadable: "+err.Error(), true)
		}
		return reconcile.Result{}, r.c1RunWritten(ctx, b, &pod, res)
	case corev1.PodFailed:
		reason, msg, retriable := podFailure(&pod)
		if err := r.rebuildCacheAfter(ctx, b, at.sn, &pod); err != nil {
			return reconcile.Result{}, err
		}
		return r.c1RunFailed(ctx, b, at, &pod, reason, msg, retriable)
	}
	return r.waitScheduled(ctx, b, &pod)
}

// c1RunWritten records the sectors whose C1 output the run reported and goes back to waiting
// (awaitSeeds completes the batch when nothing waits any more).
func (r *SealerReconciler) c1RunWritten(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod, res *Results) error {
	written := map[int64]bool{}
	for _, s := range res.Sectors {
		written[s.SectorID] = true
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.Phase = sealv1.PhaseWaitingForSeeds
		for i := range b.Status.Sectors {
			if s := &b.Status.Sectors[i]; written[s.Number] {
				s.State, s.Reason = stateC1Written, ""
			}
		}
		markAbandoned(b)
		msg := fmt.Sprintf("C1 pod %s wrote the C1 output of sectors %s", pod.Name, joinNumbers(mapKeys(written)))
		b.Status.Message = msg
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonC1Written, msg)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, string(sealv1.ReasonC1Written), "Seal", "%s", b.Status.Message)
	})
}

// c1RunFailed starts the next run when the failure may pass and runs are left (one per seed
// plus spec.maxRetries), else marks the run's sectors C1Failed with the reason: the other
// sectors' C1 goes on.
func (r *SealerReconciler) c1RunFailed(ctx context.Context, b *sealv1.SealBatch, at attemptTarget, pod *corev1.Pod, reason sealv1.Reason, why string, retriable bool) (reconcile.Result, error) {
	run := b.Status.C1Attempts
	if retriable && int(run) <= len(b.Spec.Seeds)+int(b.Spec.Retries()) {
		r.Recorder.Eventf(b, pod, corev1.EventTypeWarning, string(sealv1.ReasonRetrying), "Seal", "C1 run %d failed (%s: %s); running it again", run, reason, why)
		return r.startStep(ctx, b, at, render.StepC1, run+1)
	}
	sectors := c1RunSectors(pod, b)
	msg := fmt.Sprintf("C1 (run %d) of sectors %s: %s: %s", run, joinNumbers(sectors), reason, why)
	if !retriable {
		msg += " (not retried: another run would fail the same way)"
	}
	return reconcile.Result{}, updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.Phase = sealv1.PhaseWaitingForSeeds
		for i := range b.Status.Sectors {
			if s := &b.Status.Sectors[i]; slices.Contains(sectors, s.Number) && !c1Settled(s.State) {
				s.State, s.Reason = stateC1Failed, msg
			}
		}
		b.Status.Message = msg
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonSealerFailed, msg)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, pod, corev1.EventTypeWarning, string(sealv1.ReasonSealerFailed), "Seal", "%s", msg)
	})
}

// c1RunSectors is the sectors a C1 pod was started for (its annotation; the pending ones when
// the pod is gone).
func c1RunSectors(pod *corev1.Pod, b *sealv1.SealBatch) []int64 {
	var out []int64
	if pod != nil {
		for _, f := range strings.Split(pod.Annotations[c1SectorsAnnotation], ",") {
			if n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64); err == nil {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 {
		for _, s := range c1Pending(b) {
			out = append(out, s.Number)
		}
	}
	return out
}

// finishC1 completes the batch: each sector without a C1 outcome and not abandoned is
// SeedMissing (named in the SeedsMissing condition: its layers go with the slot, so it must
// be sealed again).
func (r *SealerReconciler) finishC1(ctx context.Context, b *sealv1.SealBatch) error {
	missing := c1Waiting(b)
	lost := ""
	if len(missing) > 0 {
		lost = fmt.Sprintf("sectors %s had no seed by spec.seedTimeout (%s): their layers are released with the slot, so they cannot be committed; seal them again",
			joinNumbers(missing), b.Spec.SeedWait())
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		now := metav1.Now()
		b.Status.Phase = sealv1.PhaseCompleted
		b.Status.CompletionTime = &now
		markAbandoned(b)
		counts := map[string]int{}
		for i := range b.Status.Sectors {
			s := &b.Status.Sectors[i]
			if slices.Contains(missing, s.Number) {
				s.State = stateSeedMissing
			}
			counts[s.State]++
		}
		done := fmt.Sprintf("C1 output written for %d of %d sectors", counts[stateC1Written], len(b.Status.Sectors))
		for _, st := range []string{stateC1Failed, stateAbandoned} {
			if counts[st] > 0 {
				done += fmt.Sprintf(", %d %s", counts[st], st)
			}
		}
		if lost != "" {
			setCondition(b, sealv1.CondSeedsMissing, metav1.ConditionTrue, sealv1.ReasonSeedTimeout, lost)
		}
		switch {
		case counts[stateC1Written] > 0:
			setCondition(b, sealv1.CondC1Complete, metav1.ConditionTrue, sealv1.ReasonC1Written, done)
		case counts[stateC1Failed] > 0:
			setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonSealerFailed, done)
		default:
			setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonSeedTimeout, done)
		}
		b.Status.Message = strings.TrimSuffix(done+"; "+lost, "; ")
	}, func(b *sealv1.SealBatch) {
		metricBatchTransitions.WithLabelValues(string(sealv1.PhaseCompleted)).Inc()
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "Completed", "Seal", "%s", b.Status.Message)
		if lost != "" {
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, string(sealv1.ReasonSeedTimeout), "Seal", "%s", lost)
		}
	})
}

// writeSeeds writes the seeds file of the next C1 run: the pending seeds only, so a run
// writes what no earlier run did (the sealer also skips a sector whose output exists).
func (r *SealerReconciler) writeSeeds(ctx context.Context, b *sealv1.SealBatch, pending []sealv1.SectorSeed) error {
	only := b.DeepCopy()
	only.Spec.Seeds = pending
	data, err := render.C1Seeds(only)
	if err != nil {
		return invalidSeeds{err}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: r.Pod.Home.SeedsConfigMapName(b), Namespace: r.Pod.Home.NamespaceOf(b), Labels: render.BatchLabels(b),
	}}
	var have corev1.ConfigMap
	switch err := r.Get(ctx, client.ObjectKeyFromObject(cm), &have); {
	case apierrors.IsNotFound(err):
		cm.Data = map[string]string{render.SeedsKey: string(data)}
		if err := r.own(b, cm); err != nil {
			return err
		}
		return r.create(ctx, cm, "ConfigMap "+cm.Name)
	case err != nil:
		return err
	case have.Data[render.SeedsKey] != string(data):
		// The previous run has ended: the next one reads only the seeds still pending.
		have.Data = map[string]string{render.SeedsKey: string(data)}
		return r.Update(ctx, &have)
	}
	return nil
}

// invalidSeeds: a seed in spec.seeds cannot be rendered (CEL admits only 32-byte values, so
// only a batch stored before that rule meets it).
type invalidSeeds struct{ error }

func seedNumbers(seeds []sealv1.SectorSeed) string {
	out := make([]int64, 0, len(seeds))
	for _, s := range seeds {
		out = append(out, s.Number)
	}
	return joinNumbers(out)
}

func joinNumbers(ns []int64) string {
	slices.Sort(ns)
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		out = append(out, strconv.FormatInt(n, 10))
	}
	return strings.Join(out, ", ")
}

func mapKeys(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
