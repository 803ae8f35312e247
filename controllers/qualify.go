package controllers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
	"github.com/sealfleet/sealfleet/internal/placement"
	"github.com/sealfleet/sealfleet/internal/predict"
	"github.com/sealfleet/sealfleet/internal/render"
)

// qualifyTimeout ends a qualification pod that has not finished by then (a node that cannot
// start it, or a device that hangs): the node keeps its last figures and says why.
const qualifyTimeout = 10 * time.Minute

// qualifyBatchPrefix marks the dirty-slot record of a qualification's write test (its
// BatchUID), so the scrub waits for the pod to end before discarding the range.
const qualifyBatchPrefix = "qualify-"

// Qualifier measures each SealerNode with a short qualification pod (`sealer qualify`): on
// join and when its layer devices change (spec.qualify OnJoin), and whenever the
// sealfleet.io/qualify annotation changes. It runs inside placement's cycle: the slot its write
// test writes is taken from the same view placement decides on, booked as a dirty slot before
// the pod starts (so no batch is placed on it, and the scrub discards it afterwards), and the
// hugepage the probe maps is booked the same way while the pod lives.
type Qualifier struct {
	client.Client
	Recorder Recorder
	// Namespace holds the qualification pods (the operator's node-pod namespace).
	Namespace string
	Pod       render.PodOptions
	// Logs reads the qualification line of a finished pod's log.
	Logs ResultsSource
	// Seconds per measurement (default 2).
	Seconds     float64
	HostNetwork bool

	mu sync.Mutex
	// booked are the claims of qualifications started but not ended, by node.
	booked map[string]booking
}

// booking is a running qualification's claim and when it was made.
type booking struct {
	claim ledger.Claim
	since time.Time
}

// Claims are the bookings of running qualifications: placement counts them like batches.
func (q *Qualifier) Claims() []ledger.Claim {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]ledger.Claim, 0, len(q.booked))
	for _, b := range q.booked {
		out = append(out, b.claim)
	}
	return out
}

func (q *Qualifier) book(node string, c *ledger.Claim, since time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.booked == nil {
		q.booked = map[string]booking{}
	}
	if c == nil {
		delete(q.booked, node)
	} else {
		q.booked[node] = booking{claim: *c, since: since}
	}
}

// needsQualification says why the node should be measured now ("" when it should not).
func needsQualification(sn *sealv1.SealerNode) string {
	if !meta.IsStatusConditionTrue(sn.Status.Conditions, sealv1.CondReady) {
		return ""
	}
	q := sn.Status.Qualification
	if req := sn.Annotations[sealv1.AnnotationQualify]; req != "" && (q == nil || q.Request != req) {
		return "requested (" + sealv1.AnnotationQualify + "=" + req + ")"
	}
	if sn.Spec.Qualify == sealv1.QualifyOnRequest {
		return ""
	}
	switch key := render.DevicesKey(sn.UsableLayerDevices()); {
	case q == nil:
		return "joined"
	case q.DevicesKey != key:
		return fmt.Sprintf("layer devices changed (%q, measured %q)", key, q.DevicesKey)
	}
	return ""
}

// Sync moves every node's qualification on: read the finished pods, start the needed ones.
// fleet is placement's view after this cycle's decisions.
func (q *Qualifier) Sync(ctx context.Context, fleet []*placement.Node) error {
	var pods corev1.PodList
	if err := q.List(ctx, &pods, client.InNamespace(q.Namespace), client.MatchingLabels{render.LabelComponent: render.ComponentQualify}); err != nil {
		return err
	}
	byNode := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byNode[p.Annotations[render.AnnotationQualifyNode]] = p
	}
	var errs []error
	for _, n := range fleet {
		sn := n.Sealer
		if p := byNode[sn.Name]; p != nil {
			if err := q.follow(ctx, sn, p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		q.mu.Lock()
		_, running := q.booked[sn.Name]
		q.mu.Unlock()
		if running {
			continue // created, not in the cache yet
		}
		if why := needsQualification(sn); why != "" && !n.NodeMissing {
			if err := q.start(ctx, n, why); err != nil {
				errs = append(errs, fmt.Errorf("qualifying %s: %w", sn.Name, err))
			}
		}
	}
	// Bookings of nodes that are gone, or whose pod vanished unread, end here.
	q.mu.Lock()
	for node, b := range q.booked {
		if byNode[node] == nil && time.Since(b.since) > time.Minute {
			delete(q.booked, node)
		}
	}
	q.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// start books the write slot and a hugepage when free, then creates the pod.
func (q *Qualifier) start(ctx context.Context, n *placement.Node, why string) error {
	sn := n.Sealer
	devices := scrubDevices(sn)
	in := render.QualifyInput{
		Namespace: q.Namespace, Node: sn.Name, Roots: sn.Spec.Roots(), Devices: devices,
		Seconds: q.Seconds, Request: sn.Annotations[sealv1.AnnotationQualify], DevicesKey: render.DevicesKey(sn.UsableLayerDevices()),
		HostNetwork: q.HostNetwork,
	}
	if in.Seconds <= 0 {
		in.Seconds = 2
	}
	claim := ledger.Claim{UID: types.UID(qualifyBatchPrefix + randomHex()), Batch: "qualification of " + sn.Name, Node: sn.Name, Slot: ledger.NoSlot}
	slot := n.Usage.FreeSlot(n.Geometry)
	if slot < 0 && len(devices) > 0 && n.Usage.Dirty() > 0 && sn.Spec.DeviceMode != sealv1.DeviceModeVFIO {
		// A slot frees as soon as its scrub ends: wait for it rather than measure the devices
		// without a write test (and, for files, without the data it would read).
		log.FromContext(ctx).V(1).Info("qualification waits for a scrub to free a slot", "node", sn.Name, "why", why)
		return nil
	}
	switch {
	case len(devices) == 0:
	case sn.Spec.DeviceMode == sealv1.DeviceModeVFIO:
		in.NoWriteReason = "deviceMode vfio: the kernel does not see the devices"
	case slot < 0:
		in.NoWriteReason = "no free slot: every slot is held by a batch or waits for its scrub"
	default:
		in.WriteSlot, in.WriteRange = &slot, n.Geometry.Range(slot)
		claim.Slot, claim.Range, claim.Dirty = slot, in.WriteRange, true
	}
	if avail, _ := placement.HugepagesAvailable(n); avail >= 1 && q.kubeletGrantsHugepages(ctx, sn.Name) {
		in.Hugepage, claim.Running, claim.Hugepages = true, true, 1
	}
	// Booked before any write goes out: the next cycles count it whatever the cache shows.
	q.book(sn.Name, &claim, time.Now())
	if in.WriteSlot != nil {
		rec := sealv1.DirtySlot{Slot: *in.WriteSlot, OffsetBytes: in.WriteRange.OffsetBytes, LengthBytes: in.WriteRange.LengthBytes,
			Batch: claim.Batch, BatchUID: string(claim.UID), Since: metav1.NewTime(time.Now().Truncate(time.Second)),
			Message: qualifyBookedMessage}
		if err := patchDirtySlots(ctx, q.Client, sn.DeepCopy(), func(d []sealv1.DirtySlot) []sealv1.DirtySlot { return addDirty(d, rec) }); err != nil {
			q.book(sn.Name, nil, time.Time{})
			return fmt.Errorf("booking slot %d: %w", *in.WriteSlot, err)
		}
	}
	p := render.QualifyPod(in, q.Pod)
	p.Annotations[annotationQualifyUID] = string(claim.UID)
	if err := controllerutil.SetControllerReference(sn, p, q.Scheme()); err != nil {
		return err
	}
	if err := q.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
		// Nothing was written: the record is handed to the scrub, which frees the slot.
		q.book(sn.Name, nil, time.Time{})
		why := fmt.Errorf("creating %s/%s: %w", p.Namespace, p.Name, err)
		if in.WriteSlot != nil {
			if perr := q.record(ctx, sn, failedQualification(sn, p, why.Error()), string(claim.UID)); perr != nil {
				return fmt.Errorf("%w; recording it: %v", why, perr)
			}
		}
		return why
	}
	log.FromContext(ctx).Info("qualifying", "node", sn.Name, "why", why, "writeSlot", in.WriteSlot, "pod", p.Name)
	q.Recorder.Eventf(sn, nil, corev1.EventTypeNormal, string(sealv1.NodeReasonQualifying), "Qualify", "qualifying %s: %s", sn.Name, why)
	return nil
}

// qualifyBookedMessage marks a write slot whose qualification has not ended: the scrub waits.
const qualifyBookedMessage = "booked for the qualification's write test; scrubbed after it"

// kubeletGrantsHugepages reports whether the node's kubelet offers 1 GiB hugepages to pods
// (pages reserved after it started are not allocatable until it restarts: a probe asking for
// one would never be scheduled).
func (q *Qualifier) kubeletGrantsHugepages(ctx context.Context, node string) bool {
	var n corev1.Node
	if err := q.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return false
	}
	hp, ok := n.Status.Allocatable["hugepages-1Gi"]
	return ok && hp.Value() >= 1<<30
}

// annotationQualifyUID ties a pod to its booking (the dirty record's BatchUID).
const annotationQualifyUID = "sealfleet.io/qualify-uid"

func randomHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// follow reads a finished pod into the node's status, or ends one that ran too long.
func (q *Qualifier) follow(ctx context.Context, sn *sealv1.SealerNode, p *corev1.Pod) error {
	if p.DeletionTimestamp != nil {
		return nil
	}
	// Re-learn the booking after an operator restart: the pod holds what it asked for.
	q.mu.Lock()
	if _, ok := q.booked[sn.Name]; !ok {
		c := ledger.Claim{UID: types.UID(p.Annotations[annotationQualifyUID]), Batch: "qualification of " + sn.Name, Node: sn.Name, Slot: ledger.NoSlot}
		if _, ok := p.Spec.Containers[0].Resources.Limits["hugepages-1Gi"]; ok {
			c.Running, c.Hugepages = true, 1
		}
		if q.booked == nil {
			q.booked = map[string]booking{}
		}
		q.booked[sn.Name] = booking{claim: c, since: p.CreationTimestamp.Time}
	}
	q.mu.Unlock()
	var next *sealv1.Qualification
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		doc, err := q.readDocument(ctx, p)
		if err != nil {
			next = failedQualification(sn, p, "qualification pod's results unreadable: "+err.Error())
		} else {
			next = doc.toStatus(p)
		}
	case corev1.PodFailed:
		reason, msg, _ := podFailure(p)
		next = failedQualification(sn, p, fmt.Sprintf("qualification pod failed (%s): %s", reason, msg))
	default:
		if time.Since(p.CreationTimestamp.Time) < qualifyTimeout {
			return nil
		}
		why := "did not finish within " + qualifyTimeout.String()
		if u := render.Unschedulable(p); u != "" {
			why += ": " + u
		}
		next = failedQualification(sn, p, "qualification pod "+why)
	}
	if err := q.record(ctx, sn, next, p.Annotations[annotationQualifyUID]); err != nil {
		return err
	}
	if err := q.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
		return err
	}
	q.book(sn.Name, nil, time.Time{})
	metricQualifications.WithLabelValues(qualifyOutcome(next)).Inc()
	if next.Message != "" && len(next.LayerDevices) == 0 {
		q.Recorder.Eventf(sn, p, corev1.EventTypeWarning, string(sealv1.NodeReasonQualificationFailed), "Qualify", "%s", next.Message)
	} else {
		q.Recorder.Eventf(sn, p, corev1.EventTypeNormal, string(sealv1.NodeReasonQualified), "Qualify", "%s", qualificationSummary(next))
	}
	return nil
}

func qualifyOutcome(q *sealv1.Qualification) string {
	if len(q.LayerDevices) == 0 && q.LabelsPerSecondPerThread == 0 {
		return "failed"
	}
	return "measured"
}

// failedQualification keeps the node's last figures with why this run gave none; it answers
// the request and devices it was started for, so a failing node is not retried in a loop.
func failedQualification(sn *sealv1.SealerNode, p *corev1.Pod, why string) *sealv1.Qualification {
	next := &sealv1.Qualification{}
	if sn.Status.Qualification != nil {
		next = sn.Status.Qualification.DeepCopy()
	}
	next.Request, next.DevicesKey = p.Annotations[render.AnnotationQualifyRequest], p.Annotations[render.AnnotationQualifyDevices]
	next.Message = truncate(why, 1000)
	return next
}

// record writes the qualification and turns the write test's booking into a plain dirty
// record the scrub discards.
func (q *Qualifier) record(ctx context.Context, sn *sealv1.SealerNode, next *sealv1.Qualification, uid string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &sealv1.SealerNode{}
		if err := q.Get(ctx, client.ObjectKeyFromObject(sn), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		upd := cur.DeepCopy()
		upd.Status.Qualification = next
		for i := range upd.Status.DirtySlots {
			if d := &upd.Status.DirtySlots[i]; uid != "" && d.BatchUID == uid {
				d.Message = "written by the qualification's write test"
			}
		}
		return q.Status().Patch(ctx, upd, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{}))
	})
}

// readDocument takes the document from the termination message, else from the log line.
func (q *Qualifier) readDocument(ctx context.Context, p *corev1.Pod) (*qualificationDoc, error) {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && strings.HasPrefix(strings.TrimSpace(t.Message), "{") {
			var d qualificationDoc
			if err := json.Unmarshal([]byte(t.Message), &d); err == nil && d.Schema == 1 {
				return &d, nil
			}
		}
	}
	if q.Logs == nil {
		return nil, fmt.Errorf("termination message holds no qualification")
	}
	raw, err := q.Logs.Read(ctx, p)
	if err != nil {
		return nil, err
	}
	var d qualificationDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("qualification in the pod log: %w", err)
	}
	return &d, nil
}

// qualificationDoc is `sealer qualify`'s document (contracts/sealer-qualification.json).
type qualificationDoc struct {
	Schema          int     `json:"schema"`
	Tool            string  `json:"tool"`
	StartedUnix     int64   `json:"started_unix"`
	DurationSeconds float64 `json:"duration_seconds"`
	Devices         []struct {
		Path              string   `json:"path"`
		Bytes             int64    `json:"bytes"`
		Direct            bool     `json:"direct"`
		QueueDepth        int32    `json:"queue_depth"`
		RandomReadIOPS    *float64 `json:"random_read_iops"`
		SeqReadBytesPerS  *float64 `json:"seq_read_bytes_per_s"`
		SeqWriteBytesPerS *float64 `json:"seq_write_bytes_per_s"`
		WriteSkipped      *string  `json:"write_skipped"`
		Error             *string  `json:"error"`
	} `json:"devices"`
	Hashing struct {
		Kernel              string  `json:"kernel"`
		Threads             int     `json:"threads"`
		LabelsPerSPerThread float64 `json:"labels_per_s_per_thread"`
	} `json:"hashing"`
	Hugepages struct {
		Free   int32   `json:"free"`
		Probed int32   `json:"probed"`
		Mapped int32   `json:"mapped"`
		Error  *string `json:"error"`
	} `json:"hugepages_1gi"`
	MemoryCopyBytesPerS float64 `json:"memory_copy_bytes_per_s"`
	GPU                 *struct {
		Name        string `json:"name"`
		MemoryBytes int64  `json:"memory_bytes"`
	} `json:"gpu"`
}

func num(p *float64) int64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return 0
	}
	return int64(math.Round(*p))
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return truncate(*p, 500)
}

// toStatus is the document as SealerNode status shows it.
func (d *qualificationDoc) toStatus(p *corev1.Pod) *sealv1.Qualification {
	end := time.Unix(d.StartedUnix, 0).Add(time.Duration(d.DurationSeconds * float64(time.Second)))
	q := &sealv1.Qualification{
		MeasuredTime: &metav1.Time{Time: end.Truncate(time.Second)}, DurationMilliseconds: int64(d.DurationSeconds * 1000),
		Tool: truncate(d.Tool, 120), Request: p.Annotations[render.AnnotationQualifyRequest], DevicesKey: p.Annotations[render.AnnotationQualifyDevices],
		HashKernel: d.Hashing.Kernel, LabelsPerSecondPerThread: int64(d.Hashing.LabelsPerSPerThread),
		Hugepages1GiFree: d.Hugepages.Free, Hugepages1GiMapped: d.Hugepages.Mapped, HugepagesError: str(d.Hugepages.Error),
		MemoryCopyBytesPerSecond: int64(d.MemoryCopyBytesPerS),
	}
	if d.GPU != nil {
		q.GPU = truncate(fmt.Sprintf("%s (%d MiB); speed not measured", d.GPU.Name, d.GPU.MemoryBytes>>20), 250)
	}
	var failed []string
	for _, dev := range d.Devices {
		dq := sealv1.DeviceQualification{Path: dev.Path, RandomReadIOPS: num(dev.RandomReadIOPS), QueueDepth: dev.QueueDepth,
			SeqReadBytesPerSecond: num(dev.SeqReadBytesPerS), SeqWriteBytesPerSecond: num(dev.SeqWriteBytesPerS),
			WriteSkipped: str(dev.WriteSkipped), Direct: dev.Direct, Error: str(dev.Error)}
		if dq.Error != "" {
			failed = append(failed, dev.Path+": "+dq.Error)
		}
		q.LayerDevices = append(q.LayerDevices, dq)
	}
	if len(failed) > 0 {
		q.Message = truncate("not measured: "+strings.Join(failed, "; "), 1000)
	}
	return q
}

// qualificationSummary is one line for events and logs.
func qualificationSummary(q *sealv1.Qualification) string {
	var devs []string
	for _, d := range q.LayerDevices {
		devs = append(devs, fmt.Sprintf("%s %s reads/s, read %s/s, write %s/s", d.Path, predict.SI(float64(d.RandomReadIOPS)),
			placement.Human(d.SeqReadBytesPerSecond), placement.Human(d.SeqWriteBytesPerSecond)))
	}
	return fmt.Sprintf("hashing %s labels/s per thread (%s); %s; hugepages %d free, %d mapped; memory %s/s",
		predict.SI(float64(q.LabelsPerSecondPerThread)), q.HashKernel, strings.Join(devs, "; "), q.Hugepages1GiFree, q.Hugepages1GiMapped, placement.Human(q.MemoryCopyBytesPerSecond))
}

// qualificationPodEnded passes the updates that end a qualification pod (the cycle reads it).
var qualificationPodEnded = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		p, ok := e.ObjectNew.(*corev1.Pod)
		return ok && p.Labels[render.LabelComponent] == render.ComponentQualify &&
			(p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
	},
}
