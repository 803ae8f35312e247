package controllers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

// C1 from the slot (spec.commit1 FromSlot): after PC2 the batch waits, holding its slot, for
// its seeds; then a C1 pod reads the labels from the slot and writes each seeded sector's
// commit-phase1-output; then the batch completes and its release policy applies.

// toWaitingForSeeds records PC2's results of a FromSlot batch and starts the wait for seeds.
func (r *SealerReconciler) toWaitingForSeeds(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod, res *Results) error {
	deadline := metav1.NewTime(time.Now().Add(b.Spec.SeedWait()))
	msg := seedsMessage(b, &deadline)
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.Phase = sealv1.PhaseWaitingForSeeds
		b.Status.Sectors = res.toStatus()
		res.recordMeasured(b)
		b.Status.SeedDeadline = &deadline
		if b.Status.Progress != nil {
			b.Status.Progress.Percent = "100"
			b.Status.Progress.ETASeconds = 0
		}
		setCondition(b, sealv1.CondPC1Complete, metav1.ConditionTrue, sealv1.ReasonLayersWritten, "all layers written")
		setCondition(b, sealv1.CondPC2Complete, metav1.ConditionTrue, sealv1.ReasonCommitted, fmt.Sprintf("%d sectors sealed", len(res.Sectors)))
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonWaitingForSeeds, msg)
		b.Status.Message = msg
	}, func(b *sealv1.SealBatch) {
		metricBatchTransitions.WithLabelValues(string(sealv1.PhaseWaitingForSeeds)).Inc()
		r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, string(sealv1.ReasonWaitingForSeeds), "Seal", "%s", msg)
	})
}

func seedsMessage(b *sealv1.SealBatch, deadline *metav1.Time) string {
	return fmt.Sprintf("PC2 done; the slot is held for C1 until every sector has its seed in spec.seeds (%d/%d given) or %s",
		len(b.Spec.Seeds), len(b.Spec.Sectors), deadline.UTC().Format(time.RFC3339))
}

// awaitSeeds starts C1 once every sector has its seed, or at the deadline with the seeds
// given by then (none: the batch completes without C1).
func (r *SealerReconciler) awaitSeeds(ctx context.Context, b *sealv1.SealBatch, at attemptTarget) (reconcile.Result, error) {
	deadline := b.Status.SeedDeadline
	if deadline == nil {
		d := metav1.NewTime(time.Now().Add(b.Spec.SeedWait()))
		deadline = &d
	}
	if wait := time.Until(deadline.Time); len(b.Spec.Seeds) < len(b.Spec.Sectors) && wait > 0 {
		msg := seedsMessage(b, deadline)
		if b.Status.Message == msg && b.Status.SeedDeadline != nil {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		return reconcile.Result{RequeueAfter: wait}, updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
			b.Status.SeedDeadline = deadline
			b.Status.Message = msg
			setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonWaitingForSeeds, msg)
		}, nil)
	}
	if len(b.Spec.Seeds) == 0 {
		return reconcile.Result{}, r.finishC1(ctx, b, nil, nil)
	}
	return r.startStep(ctx, b, at, render.StepC1, 1)
}

// runC1 follows the C1 pod: results when it succeeds, a retry or the failure when it fails.
func (r *SealerReconciler) runC1(ctx context.Context, b *sealv1.SealBatch, at attemptTarget) (reconcile.Result, error) {
	var pod corev1.Pod
	err := r.getPod(ctx, b, r.Pod.Home.C1PodName(b, b.Status.C1Attempts), &pod)
	if apierrors.IsNotFound(err) {
		return r.failOrRetryStep(ctx, b, at, render.StepC1, sealv1.ReasonPodDisappeared, "the C1 pod was deleted before it finished", true)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		res, err := readResults(ctx, r.Results, &pod)
		if err != nil {
			return reconcile.Result{}, r.fail(ctx, b, sealv1.ReasonSealerFailed, "C1 exited 0 but its results are unreadable: "+err.Error())
		}
		return reconcile.Result{}, r.finishC1(ctx, b, &pod, res)
	case corev1.PodFailed:
		reason, msg, retriable := podFailure(&pod)
		if err := r.rebuildCacheAfter(ctx, b, at.sn, &pod); err != nil {
			return reconcile.Result{}, err
		}
		return r.failOrRetryStep(ctx, b, at, render.StepC1, reason, "C1: "+msg, retriable)
	}
	return r.waitScheduled(ctx, b, &pod)
}

// finishC1 completes the batch: each sector whose C1 output the pod reported is C1Written,
// every other one SeedMissing (named in the SeedsMissing condition: its layers go with the
// slot, so it must be sealed again).
func (r *SealerReconciler) finishC1(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod, res *Results) error {
	written := map[int64]bool{}
	if res != nil {
		for _, s := range res.Sectors {
			written[s.SectorID] = true
		}
	}
	var missing []string
	for _, s := range b.Spec.Sectors {
		if !written[s.Number] {
			missing = append(missing, strconv.FormatInt(s.Number, 10))
		}
	}
	done := fmt.Sprintf("C1 output written for %d of %d sectors", len(written), len(b.Spec.Sectors))
	lost := ""
	if len(missing) > 0 {
		// The sealer writes every sector seeded when C1 started, or fails: an unwritten
		// sector had no seed by then.
		lost = fmt.Sprintf("sectors %s had no seed when C1 ran (spec.seedTimeout %s): their layers are released with the slot, so they cannot be committed; seal them again",
			strings.Join(missing, ", "), b.Spec.SeedWait())
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		now := metav1.Now()
		b.Status.Phase = sealv1.PhaseCompleted
		b.Status.CompletionTime = &now
		for i := range b.Status.Sectors {
			s := &b.Status.Sectors[i]
			s.State = "SeedMissing"
			if written[s.Number] {
				s.State = "C1Written"
			}
		}
		if lost != "" {
			setCondition(b, sealv1.CondSeedsMissing, metav1.ConditionTrue, sealv1.ReasonSeedTimeout, lost)
		}
		if len(written) == 0 {
			setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonSeedTimeout, done)
		} else {
			setCondition(b, sealv1.CondC1Complete, metav1.ConditionTrue, sealv1.ReasonC1Written, done)
		}
		b.Status.Message = strings.TrimSuffix(done+"; "+lost, "; ")
	}, func(b *sealv1.SealBatch) {
		metricBatchTransitions.WithLabelValues(string(sealv1.PhaseCompleted)).Inc()
		r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, "Completed", "Seal", "%s", done)
		if lost != "" {
			r.Recorder.Eventf(b, pod, corev1.EventTypeWarning, string(sealv1.ReasonSeedTimeout), "Seal", "%s", lost)
		}
	})
}

// ensureSeeds writes the seeds the C1 pod reads, once: a retry must see the same seeds.
func (r *SealerReconciler) ensureSeeds(ctx context.Context, b *sealv1.SealBatch) error {
	data, err := render.C1Seeds(b)
	if err != nil {
		return r.fail(ctx, b, sealv1.ReasonInvalidSpec, err.Error())
	}
	return r.createOnce(ctx, b, r.Pod.Home.SeedsConfigMapName(b), render.SeedsKey, data)
}
