package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
	"github.com/sealfleet/sealfleet/internal/cpuset"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/render"
)

// SealerReconciler runs a placed batch: it renders the sealer config and pod, follows the pod
// (progress while it runs, results when it succeeds, the reason when it fails), and retries on
// the same node and slot when the spec allows, so the sealer resumes from its last layer.
type SealerReconciler struct {
	client.Client
	Recorder         Recorder
	Pod              render.PodOptions
	Progress         ProgressSource
	Results          ResultsSource
	ProgressInterval time.Duration
	// Caches has nodes' parent caches built; sealer pods read the verified one read-only
	// (nil: the sealer builds its own in the pod, the standalone behaviour).
	Caches *ParentCaches
	// Pods reads the batch's pods, in the sealer namespace or where its status recorded them.
	Pods podReads
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;create;delete

// Reconcile drives one batch through Placed → PC1 → PC2 → Completed | Failed.
func (r *SealerReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcileBatch(ctx, req)
	var refused *creationRefused
	if errors.As(err, &refused) {
		return reconcile.Result{}, r.recordRefusal(ctx, req.NamespacedName, refused)
	}
	return res, err
}

func (r *SealerReconciler) reconcileBatch(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var b sealv1.SealBatch
	if err := r.Get(ctx, req.NamespacedName, &b); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if b.DeletionTimestamp != nil || !placed(&b) {
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(&b, Finalizer) {
		// The release reconciler adds it once the batch is placed; a sealer must never run
		// on a slot that a deletion could free without stopping it first.
		return reconcile.Result{}, nil
	}
	if synthC1Wanted(&b) {
		return r.synthC1(ctx, &b)
	}
	if b.Status.Phase.Final() {
		return reconcile.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("batch", ledger.BatchKey(&b), "node", b.Status.Node)
	ctx = log.IntoContext(ctx, logger)

	var sn sealv1.SealerNode
	if err := r.Get(ctx, client.ObjectKey{Name: b.Status.Node}, &sn); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.fail(ctx, &b, sealv1.ReasonNodeLost, fmt.Sprintf("SealerNode %s is gone (node removed)", b.Status.Node))
		}
		return reconcile.Result{}, err
	}
	var node corev1.Node
	if err := r.Get(ctx, client.ObjectKey{Name: b.Status.Node}, &node); apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.fail(ctx, &b, sealv1.ReasonNodeLost, fmt.Sprintf("node %s was deleted while the batch ran", b.Status.Node))
	}
	at := attemptTarget{sn: &sn, cordoned: node.Spec.Unschedulable}

	if b.Status.Layout == nil || (b.Status.SlotRange == nil && !b.Spec.IsUpdate()) {
		return reconcile.Result{}, r.fail(ctx, &b, sealv1.ReasonInvalidSpec, "status has no layout or slot range: the batch was placed by an older operator; delete it and create it again")
	}
	switch b.Status.Phase {
	case sealv1.PhaseWaitingForSeeds:
		return r.awaitSeeds(ctx, &b, at)
	case sealv1.PhaseC1:
		return r.runC1(ctx, &b, at)
	}

	if b.Status.Attempts == 0 {
		return r.startAttempt(ctx, &b, at, 1)
	}
	var pod corev1.Pod
	err := r.getPod(ctx, &b, r.Pod.Home.PodName(&b, b.Status.Attempts), &pod)
	if apierrors.IsNotFound(err) {
		return r.failOrRetry(ctx, &b, at, sealv1.ReasonPodDisappeared, "the sealer pod was deleted before it finished", true)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return reconcile.Result{}, r.complete(ctx, &b, &pod)
	case corev1.PodFailed:
		reason, msg, retriable := podFailure(&pod)
		if err := r.rebuildCacheAfter(ctx, &b, at.sn, &pod); err != nil {
			return reconcile.Result{}, err
		}
		return r.failOrRetry(ctx, &b, at, reason, msg, retriable)
	case corev1.PodRunning:
		return reconcile.Result{RequeueAfter: r.ProgressInterval}, r.track(ctx, &b, &pod)
	}
	return r.waitScheduled(ctx, &b, &pod)
}

// waitScheduled looks again at a pending pod later, and says on the batch (message and one
// event) when kube-scheduler finds that its node cannot hold it now: other pods there hold the
// CPUs, memory, hugepages or GPU it requests. The batch keeps its slot; the pod is bound as
// soon as they free up, or the batch can be deleted.
func (r *SealerReconciler) waitScheduled(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod) (reconcile.Result, error) {
	why := render.Unschedulable(pod)
	if why == "" {
		return reconcile.Result{RequeueAfter: r.ProgressInterval}, nil
	}
	msg := fmt.Sprintf("pod %s waits for kube-scheduler to bind it to %s, which cannot hold it now (other pods there hold what it requests): %s", pod.Name, b.Status.Node, why)
	return r.waitAttempt(ctx, b, msg, string(sealv1.ReasonPodUnschedulable), r.ProgressInterval)
}

// slotOf is the batch's slot (ledger.NoSlot when it holds none).
func slotOf(b *sealv1.SealBatch) int32 {
	if b.Status.Slot == nil {
		return ledger.NoSlot
	}
	return *b.Status.Slot
}

// placed reports whether placement has committed the batch: its node, and its slot unless it
// is an update (which holds none).
func placed(b *sealv1.SealBatch) bool {
	return b.Status.Node != "" && (b.Status.Slot != nil || b.Spec.IsUpdate())
}

// waitAttempt says, once, why the next attempt waits (status message and an event) and looks
// again after `again`.
func (r *SealerReconciler) waitAttempt(ctx context.Context, b *sealv1.SealBatch, msg, event string, again time.Duration) (reconcile.Result, error) {
	if b.Status.Message == msg {
		return reconcile.Result{RequeueAfter: again}, nil
	}
	return reconcile.Result{RequeueAfter: again}, updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.Message = msg
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, event, "Seal", "%s", msg)
	})
}

// exitParentCache is the sealer's exit code for a missing, unverified or corrupt parent cache.
const exitParentCache = 6

// rebuildCacheAfter has the node's parent cache rebuilt when the sealer found it unusable,
// once per failed pod; the next attempt waits for the rebuild (startAttempt).
func (r *SealerReconciler) rebuildCacheAfter(ctx context.Context, b *sealv1.SealBatch, sn *sealv1.SealerNode, pod *corev1.Pod) error {
	if r.Caches == nil || sn == nil || exitCode(pod) != exitParentCache {
		return nil
	}
	return r.Caches.Rebuild(ctx, sn, b.Status.RegisteredProof, pod.UID)
}

// exitCode is the sealer container's exit code (0 when it has none).
func exitCode(pod *corev1.Pod) int32 {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return t.ExitCode
		}
	}
	return 0
}

func (r *SealerReconciler) parentCacheDir() string {
	if r.Caches == nil {
		return ""
	}
	return render.ParentCacheMount
}

func (r *SealerReconciler) parentCachePath(sn *sealv1.SealerNode) string {
	if r.Caches == nil || sn == nil {
		return ""
	}
	return sn.Spec.CachePath()
}

// metricsPort is the sealer's HTTP port: with host networking each slot gets its own. An
// update's sealer serves none (0).
func (r *SealerReconciler) metricsPort(b *sealv1.SealBatch) int {
	if b.Spec.IsUpdate() {
		return 0
	}
	if r.Pod.HostNetwork {
		return r.Pod.MetricsPort + int(*b.Status.Slot)
	}
	return r.Pod.MetricsPort
}

// ensureConfig creates the sealer config ConfigMap (owned by the batch). It is written once:
// a retry must see the same config to resume.
func (r *SealerReconciler) ensureConfig(ctx context.Context, b *sealv1.SealBatch, sn *sealv1.SealerNode, lay *layout.Layout) error {
	if field := r.Pod.Home.UnreachableClaim(b); field != "" {
		return r.fail(ctx, b, sealv1.ReasonInvalidSpec, fmt.Sprintf("%s: sealer pods run in the operator's namespace %s, where a claim of namespace %s cannot be mounted; use a hostPath under the node's spec.hostPathRoots, or create the batch in %s with the claim there",
			field, r.Pod.Home.Namespace, b.Namespace, r.Pod.Home.Namespace))
	}
	cfg, err := r.renderConfig(b, sn, lay)
	if err != nil {
		return r.fail(ctx, b, sealv1.ReasonInvalidSpec, err.Error())
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return r.createOnce(ctx, b, r.Pod.Home.ConfigMapName(b), render.ConfigKey, data)
}

// createOnce creates a ConfigMap of the batch with one key, unless it exists: what a pod
// reads is fixed when first written, so every retry sees the same.
func (r *SealerReconciler) createOnce(ctx context.Context, b *sealv1.SealBatch, name, key string, data []byte) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: r.Pod.Home.NamespaceOf(b), Labels: render.BatchLabels(b),
	}, Data: map[string]string{key: string(data)}}
	if err := r.own(b, cm); err != nil {
		return err
	}
	return r.create(ctx, cm, "ConfigMap "+name)
}

// ownPod gives a pod its controller: the batch where they share a namespace; in the shared
// sealer namespace the batch's config ConfigMap there, so that kubectl drain treats the pod as
// managed (and reaches the disruption budget) and the pod goes when the config does.
func (r *SealerReconciler) ownPod(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod) error {
	if !r.Pod.Home.Shared() {
		return controllerutil.SetControllerReference(b, pod, r.Scheme())
	}
	var cm corev1.ConfigMap
	if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: r.Pod.Home.ConfigMapName(b)}, &cm); err != nil {
		return fmt.Errorf("the sealer config of %s/%s (its pods' owner): %w", b.Namespace, b.Name, err)
	}
	return controllerutil.SetControllerReference(&cm, pod, r.Scheme())
}

// own makes the batch the owner of obj where both share a namespace; in the shared sealer
// namespace the labels alone link them, and release deletes what the batch left.
func (r *SealerReconciler) own(b *sealv1.SealBatch, obj client.Object) error {
	if r.Pod.Home.Shared() {
		return nil
	}
	return controllerutil.SetControllerReference(b, obj, r.Scheme())
}

// renderConfig is the sealer's config: a seal's batch config, or an update's snap config.
func (r *SealerReconciler) renderConfig(b *sealv1.SealBatch, sn *sealv1.SealerNode, lay *layout.Layout) (any, error) {
	if b.Spec.IsUpdate() {
		return render.UpdateConfig(b, render.OutputDir(b))
	}
	layJSON, err := lay.JSON()
	if err != nil {
		return nil, err
	}
	devs := sn.UsableLayerDevices()
	return render.Config(render.ConfigInput{
		Batch:          b,
		LayerPaths:     render.LayerPaths(devs),
		SlotOffset:     b.Status.SlotRange.OffsetBytes,
		Layout:         layJSON,
		OutputDir:      render.OutputDir(b),
		MetricsPort:    r.metricsPort(b),
		MetricsAddress: r.Pod.MetricsAddress,
		ParentCacheDir: r.parentCacheDir(),
	})
}

// attemptTarget is the node a new attempt would run on.
type attemptTarget struct {
	sn *sealv1.SealerNode
	// cordoned: the Node is marked unschedulable (a drain or maintenance is under way).
	cordoned bool
}

// waitForUncordon is how often a batch whose node is cordoned looks again.
const waitForUncordon = 30 * time.Second

// waitForCache is how often an attempt waiting for its node's parent cache looks again (the
// builder pod is not the batch's, so its end wakes nothing).
const waitForCache = 5 * time.Second

// startAttempt creates the sealer pod of an attempt (and the disruption budget that keeps a
// drain from evicting it) and records it. Creating first and recording second is safe: a
// crash in between finds the pod by name on the next reconcile.
//
// On a cordoned node no attempt starts: the pod names its node, so the scheduler's cordon
// would not stop it, and an admin draining the node expects it to empty. The batch's layers
// are on that node, so it waits there for the uncordon.
func (r *SealerReconciler) startAttempt(ctx context.Context, b *sealv1.SealBatch, at attemptTarget, attempt int32) (reconcile.Result, error) {
	return r.startStep(ctx, b, at, render.StepSeal, attempt)
}

// startStep is startAttempt for a step: the seal, or C1 from the slot (its seeds written
// first; it reads the slot and the node's parent cache, and asks for one CPU that placement
// does not book: the batch's cores went back when PC2 ended).
func (r *SealerReconciler) startStep(ctx context.Context, b *sealv1.SealBatch, at attemptTarget, step render.Step, attempt int32) (reconcile.Result, error) {
	if at.cordoned {
		msg := fmt.Sprintf("node %s is cordoned: attempt %d waits for it to be uncordoned (the batch's layers are there)", b.Status.Node, attempt)
		return r.waitAttempt(ctx, b, msg, "WaitingForUncordon", waitForUncordon)
	}
	if r.Caches != nil && !b.Spec.IsUpdate() {
		msg, err := r.Caches.Wait(ctx, at.sn, b.Status.RegisteredProof)
		if err != nil {
			return reconcile.Result{}, err
		}
		if msg != "" {
			return r.waitAttempt(ctx, b, fmt.Sprintf("attempt %d waits: %s", attempt, msg), "WaitingForParentCache", waitForCache)
		}
	}
	// The config is written before the first pod and read by every later one (written once,
	// so a retry resumes from the same); checked here, at each pod's start, not at every event.
	lay := layout.FromRecord(b.Status.Layout, len(b.Spec.Sectors))
	if err := r.ensureConfig(ctx, b, at.sn, lay); err != nil || b.Status.Phase == sealv1.PhaseFailed {
		return reconcile.Result{}, err // a config that cannot be rendered failed the batch: no pod
	}
	cpus, err := cpuset.Parse(b.Status.CPUs)
	if err != nil {
		return reconcile.Result{}, r.fail(ctx, b, sealv1.ReasonInvalidSpec, "status.cpus: "+err.Error())
	}
	pdb := render.DisruptionBudget(b, r.Pod.Home)
	if err := r.own(b, pdb); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.create(ctx, pdb, "disruption budget "+pdb.Name); err != nil {
		return reconcile.Result{}, err
	}
	in := render.PodInput{Batch: b, Node: b.Status.Node, Attempt: attempt, CPUs: len(cpus), Hugepages: b.Status.Hugepages1Gi}
	if !b.Spec.IsUpdate() { // an update reads no layers and no graph
		in.Devices, in.DeviceMode, in.ParentCachePath = at.sn.UsableLayerDevices(), at.sn.Spec.DeviceMode, r.parentCachePath(at.sn)
	}
	pending := c1Pending(b)
	if step == render.StepC1 {
		if err := r.writeSeeds(ctx, b, pending); err != nil {
			if invalid := (invalidSeeds{}); errors.As(err, &invalid) {
				return reconcile.Result{}, r.fail(ctx, b, sealv1.ReasonInvalidSpec, err.Error())
			}
			return reconcile.Result{}, err
		}
		in.Step, in.CPUs, in.Hugepages = render.StepC1, 1, 0
	}
	pod := render.Pod(in, r.podOptionsFor(b))
	if step == render.StepC1 {
		metav1.SetMetaDataAnnotation(&pod.ObjectMeta, c1SectorsAnnotation, strings.ReplaceAll(seedNumbers(pending), " ", ""))
	}
	if err := r.ownPod(ctx, b, pod); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.create(ctx, pod, "sealer pod "+pod.Name); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.PodName, b.Status.PodNamespace = pod.Name, pod.Namespace
		b.Status.Message = fmt.Sprintf("sealer pod %s (attempt %d) created", pod.Name, attempt)
		clearRefusal(b, b.Status.Message)
		if step == render.StepC1 {
			b.Status.C1Attempts = attempt
			b.Status.Phase = sealv1.PhaseC1
			msg := fmt.Sprintf("C1 pod %s (run %d) reads the labels of sectors %s from the slot", pod.Name, attempt, seedNumbers(pending))
			setCondition(b, sealv1.CondC1Complete, metav1.ConditionFalse, sealv1.ReasonC1Running, msg)
			b.Status.Message = msg
			return
		}
		b.Status.Attempts = attempt
	}, func(b *sealv1.SealBatch) {
		r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, "PodCreated", "Seal", "sealer pod %s created (attempt %d)", pod.Name, attempt)
	})
}

func (r *SealerReconciler) podOptionsFor(b *sealv1.SealBatch) render.PodOptions {
	o := r.Pod
	o.MetricsPort = r.metricsPort(b)
	return o
}

// track reads the sealer's progress and moves the phase to PC1 or PC2 (Updating for an
// update, whose sealer reports no progress).
func (r *SealerReconciler) track(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod) error {
	var rep *ProgressReport
	phase := sealv1.PhaseUpdating
	if !b.Spec.IsUpdate() {
		var err error
		if rep, err = r.Progress.Read(ctx, pod, r.metricsPort(b)); err != nil {
			log.FromContext(ctx).V(1).Info("progress not readable yet", "error", err.Error())
		}
		phase = sealv1.PhasePC1
		if rep != nil && (rep.Phase == "pc2" || rep.Phase == "proofs") { // proofs: SyntheticPoRep's, after PC2
			phase = sealv1.PhasePC2
		}
		if !b.Status.Phase.CanMoveTo(phase) {
			phase = b.Status.Phase // a late report never moves a batch back
		}
	}
	old := b.Status.Phase
	if rep != nil {
		metricBatchProgress.WithLabelValues(b.Namespace, b.Name, b.Status.Node).Set(rep.Percent / 100)
		if phase == sealv1.PhasePC1 {
			exportRates(b, rep)
		} else {
			forgetRates(b)
		}
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		b.Status.Phase = phase
		if b.Status.StartTime == nil {
			now := metav1.Now()
			b.Status.StartTime = &now
		}
		if rep != nil {
			now := metav1.Now()
			b.Status.Progress = rep.toStatus(&now)
			if rep.CPUs != nil {
				b.Status.RunningCPUs = rep.CPUs.toStatus()
			}
		}
		switch phase {
		case sealv1.PhasePC1:
			setCondition(b, sealv1.CondPC1Complete, metav1.ConditionFalse, sealv1.ReasonLabelling, "sealer is labelling layers")
		case sealv1.PhasePC2:
			setCondition(b, sealv1.CondPC1Complete, metav1.ConditionTrue, sealv1.ReasonLayersWritten, "all layers written")
			setCondition(b, sealv1.CondPC2Complete, metav1.ConditionFalse, sealv1.ReasonTreesBuilding, "sealer is building tree-c and tree-r-last")
		case sealv1.PhaseUpdating:
			setCondition(b, sealv1.CondUpdated, metav1.ConditionFalse, sealv1.ReasonEncoding, "sealer is encoding the data into the sector keys")
		}
		b.Status.Message = fmt.Sprintf("sealer running (%s)", strings.ToLower(string(phase)))
	}, func(b *sealv1.SealBatch) {
		if old != phase {
			metricBatchTransitions.WithLabelValues(string(phase)).Inc()
			r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, "Phase"+string(phase), "Seal", "batch entered %s", phase)
		}
	})
}

// complete records the per-sector results of a succeeded sealer.
func (r *SealerReconciler) complete(ctx context.Context, b *sealv1.SealBatch, pod *corev1.Pod) error {
	res, err := readResults(ctx, r.Results, pod)
	if err != nil {
		return r.fail(ctx, b, sealv1.ReasonSealerFailed, "sealer exited 0 but its results are unreadable: "+err.Error())
	}
	if err := res.matches(b); err != nil {
		return r.fail(ctx, b, sealv1.ReasonSealerFailed, err.Error())
	}
	if b.Spec.FromSlot() {
		return r.toWaitingForSeeds(ctx, b, pod, res)
	}
	metricBatchProgress.DeleteLabelValues(b.Namespace, b.Name, b.Status.Node)
	forgetRates(b)
	done := fmt.Sprintf("%d sectors sealed", len(res.Sectors)-len(res.failed()))
	if b.Spec.IsUpdate() {
		done = fmt.Sprintf("%d sectors updated", len(res.Sectors)-len(res.failed()))
	}
	return updateStatus(ctx, r.Client, b, func(b *sealv1.SealBatch) {
		now := metav1.Now()
		b.Status.Phase = sealv1.PhaseCompleted
		b.Status.CompletionTime = &now
		b.Status.Sectors = res.toStatus()
		res.recordMeasured(b)
		if b.Status.Progress != nil {
			b.Status.Progress.Percent = "100"
			b.Status.Progress.ETASeconds = 0
		}
		if b.Spec.IsUpdate() {
			setCondition(b, sealv1.CondUpdated, metav1.ConditionTrue, sealv1.ReasonEncoded, done)
		} else {
			setCondition(b, sealv1.CondPC1Complete, metav1.ConditionTrue, sealv1.ReasonLayersWritten, "all layers written")
			setCondition(b, sealv1.CondPC2Complete, metav1.ConditionTrue, sealv1.ReasonCommitted, done)
		}
		b.Status.Message = done
		recordSectorFailures(b, res)
	}, func(b *sealv1.SealBatch) {
		metricBatchTransitions.WithLabelValues(string(sealv1.PhaseCompleted)).Inc()
		r.Recorder.Eventf(b, pod, corev1.EventTypeNormal, "Completed", "Seal", "%s", done)
		r.sectorFailuresSeen(b, pod, res)
	})
}

// recordSectorFailures puts the SectorsFailed condition on a batch whose sealer left sectors
// out (their states and reasons are in status.sectors).
func recordSectorFailures(b *sealv1.SealBatch, res *Results) {
	failed := res.failed()
	if len(failed) == 0 {
		return
	}
	var named []string
	reason := sealv1.ReasonSectorChecksFailed
	for _, f := range failed {
		named = append(named, fmt.Sprintf("%d (%s)", f.SectorID, f.FailureClass))
		if failureReason(f) == sealv1.ReasonAudit {
			reason = sealv1.ReasonAudit // the graver: outputs that were wrong, not inputs
		}
	}
	others := "sealed"
	if b.Spec.IsUpdate() {
		others = "updated"
	}
	msg := fmt.Sprintf("%d of %d sectors failed and were left out, the others %s: %s; status.sectors[].reason says why each",
		len(failed), len(res.Sectors), others, strings.Join(named, ", "))
	setCondition(b, sealv1.CondSectorsFailed, metav1.ConditionTrue, reason, msg)
	b.Status.Message += "; " + msg
}

// sectorFailuresSeen counts the left-out sectors and tells the batch's owner which and why.
func (r *SealerReconciler) sectorFailuresSeen(b *sealv1.SealBatch, pod *corev1.Pod, res *Results) {
	for _, f := range res.failed() {
		metricSectorFailures.WithLabelValues(f.FailureClass).Inc()
		r.Recorder.Eventf(b, pod, corev1.EventTypeWarning, string(failureReason(f)), "Seal", "sector %d left out of the batch: %s", f.SectorID, truncate(f.Failed, 900))
	}
}

// failureReason is the typed reason of a left-out sector: Audit for outputs that failed the
// audit before handoff, SectorChecksFailed for the rest.
func failureReason(f SectorResult) sealv1.Reason {
	if f.FailureClass == failureClassAudit {
		return sealv1.ReasonAudit
	}
	return sealv1.ReasonSectorChecksFailed
}

// failureClassAudit: the sealer's class of a sector whose outputs failed its audit.
const failureClassAudit = "audit"

// failOrRetry starts the next attempt on the same node and slot when retries remain and the
// failure could go differently next time, else fails the batch.
func (r *SealerReconciler) failOrRetry(ctx context.Context, b *sealv1.SealBatch, at attemptTarget, reason sealv1.Reason, msg string, retriable bool) (reconcile.Result, error) {
	if !retriable {
		return reconcile.Result{}, r.fail(ctx, b, reason, msg+" (not retried: another attempt would fail the same way)")
	}
	if attempts := b.Status.Attempts; attempts <= b.Spec.Retries() {
		if !at.cordoned {
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, string(sealv1.ReasonRetrying), "Seal",
				"attempt %d failed (%s: %s); retrying on %s", attempts, reason, msg, placedMessage(b.Status.Node, slotOf(b)))
		}
		return r.startAttempt(ctx, b, at, attempts+1)
	}
	return reconcile.Result{}, r.fail(ctx, b, reason, msg)
}

// fail marks the batch Failed; the slot stays held until the release policy frees it.
func (r *SealerReconciler) fail(ctx context.Context, b *sealv1.SealBatch, reason sealv1.Reason, msg string) error {
	return markFailed(ctx, r.Client, r.Recorder, b, reason, msg)
}

func markFailed(ctx context.Context, c client.Client, rec Recorder, b *sealv1.SealBatch, reason sealv1.Reason, msg string) error {
	metricBatchProgress.DeleteLabelValues(b.Namespace, b.Name, b.Status.Node)
	forgetRates(b)
	return updateStatus(ctx, c, b, func(b *sealv1.SealBatch) {
		now := metav1.Now()
		b.Status.Phase = sealv1.PhaseFailed
		b.Status.CompletionTime = &now
		b.Status.Message = msg
		setCondition(b, sealv1.CondFailed, metav1.ConditionTrue, reason, msg)
	}, func(b *sealv1.SealBatch) {
		metricBatchTransitions.WithLabelValues(string(sealv1.PhaseFailed)).Inc()
		rec.Eventf(b, nil, corev1.EventTypeWarning, string(reason), "Seal", "%s", msg)
	})
}

// podFailure explains a failed pod (eviction, or the sealer's exit code and message) and
// whether another attempt could succeed.
func podFailure(pod *corev1.Pod) (reason sealv1.Reason, msg string, retriable bool) {
	if pod.Status.Reason == "Evicted" {
		return sealv1.ReasonPodEvicted, "sealer pod evicted: " + pod.Status.Message, true
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && cs.Name == render.ClaimOutputContainer {
			msg := truncate(strings.TrimSpace(t.Message), 1024)
			if t.ExitCode == render.ExitOutputOwned {
				return sealv1.ReasonOutputOwned, msg, false
			}
			return sealv1.ReasonSealerFailed, fmt.Sprintf("claiming the output directory failed (exit %d): %s", t.ExitCode, msg), true
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			msg := strings.TrimSpace(t.Message)
			if msg == "" {
				msg = t.Reason
			}
			reason := sealv1.ReasonSealerFailed
			switch t.ExitCode {
			case exitDataMismatch:
				reason = sealv1.ReasonDataMismatch
			case exitGPU:
				reason = sealv1.ReasonGPUFailed
			}
			return reason, fmt.Sprintf("sealer exited %d (%s): %s", t.ExitCode, exitMeaning(t.ExitCode), truncate(msg, 1024)),
				!deterministicExit(t.ExitCode)
		}
	}
	msg = pod.Status.Message
	if msg == "" {
		msg = pod.Status.Reason
	}
	return sealv1.ReasonSealerFailed, "sealer pod failed: " + msg, true
}

// deterministicExit: exits the table (contracts/exit-codes.json) says repeat on every attempt
// with the same config on the same node (bad input, no SHA-NI, data that is not its pieces).
func deterministicExit(code int32) bool {
	c, ok := contracts.Exit(code)
	return ok && c.Operator == "fail"
}

// The exits the operator acts on by number; a test checks them against the table's names.
const (
	// exitDataMismatch: a data sector's file or commD does not match its pieces.
	exitDataMismatch = 7
	// exitGPU: pc2Engine gpu has no usable device or the device failed (lost, out of
	// memory): retried, and the message names the device.
	exitGPU = 8
)

// exitMeaning names the sealer's exit codes (contracts/exit-codes.json).
func exitMeaning(code int32) string {
	if c, ok := contracts.Exit(code); ok {
		return c.Meaning
	}
	if code == 137 {
		return "killed"
	}
	return "error"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// SetupWithManager watches batches and the pods and ConfigMaps they own, and Node deletions
// (a lost node fails its batches).
func (r *SealerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sealer").
		WithOptions(controller.Options{MaxConcurrentReconciles: batchWorkers}).
		For(&sealv1.SealBatch{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(batchOfObject)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.batchesOnNode), builder.WithPredicates(nodeGoneOrUncordoned)).
		Watches(&sealv1.SealerNode{}, handler.EnqueueRequestsFromMapFunc(r.batchesOnNode), builder.WithPredicates(deletedOnly)).
		Complete(r)
}

func (r *SealerReconciler) batchesOnNode(ctx context.Context, o client.Object) []reconcile.Request {
	return batchesOnNode(ctx, r.Client, o.GetName())
}

// batchOfObject maps a pod (or anything labelled for a batch) to its batch, wherever it lives.
func batchOfObject(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := render.BatchOf(o)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// getPod reads the batch's pod of this attempt where Home puts it, or where the batch's status
// recorded it: a pod an operator with another --sealer-namespace created (before an upgrade)
// must be followed to its end, never taken for gone while it may still write the slot.
func (r *SealerReconciler) getPod(ctx context.Context, b *sealv1.SealBatch, name string, pod *corev1.Pod) error {
	err := r.Pods.Get(ctx, client.ObjectKey{Namespace: r.Pod.Home.NamespaceOf(b), Name: name}, pod)
	if !apierrors.IsNotFound(err) || b.Status.PodName == "" {
		return err
	}
	ns := b.Status.PodNamespace
	if ns == "" {
		ns = b.Namespace
	}
	if ns == r.Pod.Home.NamespaceOf(b) && b.Status.PodName == name {
		return err
	}
	err2 := r.Pods.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Status.PodName}, pod)
	if err2 == nil && pod.Labels[render.LabelBatchUID] == string(b.UID) {
		return nil
	}
	if apierrors.IsForbidden(err2) {
		return err2 // unknown is not gone: the pod there may still write the slot
	}
	return err
}
