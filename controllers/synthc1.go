package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// C1 of SyntheticPoRep sectors on request: a completed SyntheticPoRep batch keeps each sector's
// synthetic vanilla proofs in its cache directory, so its C1 needs no slot, layers or parent
// cache. For the seeds given in spec.seeds (by the sector's owner once its precommit landed;
// for a remote-seal order, its partner's commit1) a C1 pod on the batch's node reads the proofs
// and writes each seeded sector's commit-phase1-output. Runs follow one another (status.
// c1Attempts numbers them), each for the seeded sectors that have no output yet, so seeds that
// arrive days apart each get their C1 without holding anything in between.

// synthC1Retry is how soon a run that failed for a reason that may pass is tried again.
const synthC1Retry = 30 * time.Second

// synthC1Wanted: a completed SyntheticPoRep batch with seeds.
func synthC1Wanted(b *sealv1.SealBatch) bool {
	return b.Spec.ProofTypeOrDefault() == sealv1.ProofTypeSyntheticPoRep && b.Status.Phase == sealv1.PhaseCompleted && len(b.Spec.Seeds) > 0
}

// synthC1 follows the current run and starts the next one while seeded sectors lack their C1
// output.
func (r *SealerReconciler) synthC1(ctx context.Context, b *sealv1.SealBatch) (reconcile.Result, error) {
	if run := b.Status.C1Attempts; run > 0 {
		var pod corev1.Pod
		err := r.getPod(ctx, b, r.Pod.Home.C1PodName(b, run), &pod)
		switch {
		case apierrors.IsNotFound(err):
			if len(c1Pending(b)) > 0 && !r.synthC1Recorded(b, run) {
				return r.synthC1Failed(ctx, b, nil, "the C1 pod was deleted before it finished", true)
			}
		case err != nil:
			return reconcile.Result{}, err
		case pod.Status.Phase == corev1.PodSucceeded:
			res, err := readResults(ctx, r.Results, &pod)
			if err != nil {
				return r.synthC1Failed(ctx, b, &pod, "C1 exited 0 but its results are unreadable: "+err.Error(), false)
			}
			if err := r.synthC1Written(ctx, b, &pod, res); err != nil {
				return reconcile.Result{}, err
			}
		case pod.Status.Phase == corev1.PodFailed:
			if r.synthC1Recorded(b, run) {
				break
			}
			_, msg, retriable := podFailure(&pod)
			return r.synthC1Failed(ctx, b, &pod, msg, retriable)
		default:
			return r.waitScheduled(ctx, b, &pod)
		}
	}
	pending := c1Pending(b)
	if len(pending) == 0 {
		return reconcile.Result{}, nil
	}
	var sn sealv1.SealerNode
	if err := r.Get(ctx, client.ObjectKey{Name: b.Status.Node}, &sn); apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.synthC1Give(ctx, b, nil, pending, fmt.Sprintf("node %s, which holds the synthetic proofs, is gone", b.Status.Node))
	} else if err != nil {
		return reconcile.Result{}, err
	}
	return r.startSynthC1(ctx, b, pending)
}

// startSynthC1 writes the pending seeds (the next run's) and creates the run's C1 pod: one
// CPU, no hugepages, no layer devices or parent cache.
func (r *SealerReconciler) startSynthC1(ctx context.Context, b *sealv1.SealBatch, pending []sealv1.SectorSeed) (reconcile.Result, error) {
	run := b.Status.C1Attempts + 1
	if err := r.writeSeeds(ctx, b, pending); err != nil {
		if invalid := (invalidSeeds{}); errors.As(err, &invalid) {
			return reconcile.Result{}, r.synthC1Give(ctx, b, nil, pending, err.Error())
		}
		return reconcile.Result{}, err
	}
	pod := render.Pod(render.PodInput{Batch: b, Node: b.Status.Node, Attempt: run, CPUs: 1, Step: render.StepC1}, r.podOptionsFor(b))
	if err := r.ownPod(ctx, b, pod); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.create(ctx, pod, "C1 pod "+pod.Name); err != nil {
		return reconcile.Result{}, err
	}
	numbers := seedNumbers(pending)
	msg := fmt.Sprintf("C1 pod %s (run %d) writes the C1 output of sectors %s from their synthetic proofs", pod.Name, run, numbers)
	return reconcile.Result{}, updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.C1Attempts = run
		b.Status.Message = msg
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonC1FromProofs, msg)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, "PodCreated", "Seal", "%s", msg)
	})
}

// synthC1Written records the sectors whose C1 output the run reported.
func (r *SealerReconciler) synthC1Written(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod, res *Results) error {
	written := map[int64]bool{}
	for _, s := range res.Sectors {
		written[s.SectorID] = true
	}
	fresh := false
	for _, s := range b.Status.Sectors {
		fresh = fresh || written[s.Number] && s.State != stateC1Written
	}
	if !fresh {
		return nil
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		n := 0
		for i := range b.Status.Sectors {
			if s := &b.Status.Sectors[i]; written[s.Number] {
				s.State = stateC1Written
			}
			if b.Status.Sectors[i].State == stateC1Written {
				n++
			}
		}
		msg := fmt.Sprintf("C1 output written for %d of %d sectors (from their synthetic proofs)", n, len(b.Status.Sectors))
		b.Status.Message = msg
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionTrue, sealv1.ReasonC1Written, msg)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, string(sealv1.ReasonC1Written), "Seal", "C1 pod %s wrote the C1 output of %d sectors", pod.Name, len(written))
	})
}

// synthC1Recorded: the run's failure is already on the batch (its sectors given up, or a later
// run due), so the pod is not looked at again.
func (r *SealerReconciler) synthC1Recorded(b *sealv1.SealBatch, run int32) bool {
	c := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondC1Complete)
	return c != nil && c.Reason == string(sealv1.ReasonSealerFailed) && strings.Contains(c.Message, fmt.Sprintf("(run %d)", run))
}

// synthC1Failed tries again later when the failure may pass (a lost pod, an I/O error) and
// there are runs left (at most three beyond one per seed), else gives the pending sectors up.
func (r *SealerReconciler) synthC1Failed(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod, why string, retriable bool) (reconcile.Result, error) {
	pending := c1Pending(b)
	run := b.Status.C1Attempts
	if !retriable || int(run) >= len(b.Spec.Seeds)+3 {
		return reconcile.Result{}, r.synthC1Give(ctx, b, pod, pending, fmt.Sprintf("C1 (run %d): %s", run, why))
	}
	msg := fmt.Sprintf("C1 (run %d) failed: %s; trying again in %s", run, why, synthC1Retry)
	if err := updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.Message = msg
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonSealerFailed, msg)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, pod, corev1.EventTypeWarning, string(sealv1.ReasonSealerFailed), "Seal", "%s", msg)
	}); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: synthC1Retry}, nil
}

// synthC1Give marks the pending sectors C1Failed with the reason: their seeds cannot give a C1
// output here (the proofs are gone, or the run fails every time).
func (r *SealerReconciler) synthC1Give(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod, pending []sealv1.SectorSeed, why string) error {
	msg := fmt.Sprintf("no C1 output for sectors %s: %s", seedNumbers(pending), why)
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		for i := range b.Status.Sectors {
			s := &b.Status.Sectors[i]
			if slices.ContainsFunc(pending, func(p sealv1.SectorSeed) bool { return p.Number == s.Number }) {
				s.State, s.Reason = stateC1Failed, msg
			}
		}
		b.Status.Message = msg
		setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonSealerFailed, msg)
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, pod, corev1.EventTypeWarning, string(sealv1.ReasonSealerFailed), "Seal", "%s", msg)
	})
}
