package controllers

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/placement"
)

// Operator metrics, on controller-runtime's registry (served at the manager's /metrics next
// to controller_runtime_reconcile_errors_total and friends).
var (
	metricBatches = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_batches", Help: "SealBatches by phase.",
	}, []string{"phase"})
	metricPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sealfleet_batches_pending", Help: "Batches waiting for placement.",
	})
	metricPendingNoFit = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sealfleet_batches_pending_unschedulable", Help: "Pending batches that fit no node in the last scheduling cycle.",
	})
	metricPlacementLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sealfleet_placement_latency_seconds", Help: "Time from SealBatch creation to placement.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
	})
	metricScheduleCycle = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sealfleet_schedule_cycle_seconds", Help: "Duration of one scheduling cycle over the whole queue.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	metricSlots = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_node_slots", Help: "Layer slots per node by state (free, used, dirty: released and waiting for its scrub; dirty slots count as used too).",
	}, []string{"node", "state"})
	metricReleaseFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sealfleet_release_failures_total", Help: "Releases that failed or got stuck, by reason.",
	}, []string{"reason"})
	metricBatchTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sealfleet_batch_transitions_total", Help: "Batch phase transitions.",
	}, []string{"phase"})
	metricSectorFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sealfleet_sector_failures_total",
		Help: "Sectors a batch went on without: a check of their own failed (reason input, data-mismatch or io), or their outputs failed the audit before handoff (reason audit); the others were sealed.",
	}, []string{"reason"})
	metricBatchPhaseSeconds = &phaseClock{desc: prometheus.NewDesc("sealfleet_batch_phase_seconds",
		"Seconds a batch has spent in its current phase.",
		[]string{"namespace", "batch", "phase", "node", "sector_size", "sectors"}, nil)}
	metricBatchProgress = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_batch_progress_ratio", Help: "Progress of a running batch, 0-1, as last read from its sealer.",
	}, []string{"namespace", "batch", "node"})
	metricBatchRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_batch_labels_per_second", Help: "PC1 labelling rate of a running batch over all its sectors, as last read from its sealer.",
	}, []string{"namespace", "batch", "node"})
	metricBatchPredictedRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_batch_predicted_labels_per_second", Help: "PC1 labelling rate placement predicted for a running batch, and what it predicted would limit it (hashers, or layer device reads).",
	}, []string{"namespace", "batch", "node", "bottleneck"})
	metricRemoteSealRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sealfleet_remote_seal_request_seconds", Help: "Remote-seal protocol requests by route and status code (sealed-data, cache-data and commit1 answer 307: the bytes come from the node).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"route", "code"})
	metricOrderCompleteSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sealfleet_remote_seal_order_complete_seconds", Help: "Time from a remote-seal order to its sector being complete (sealed, CIDs known).",
		Buckets: prometheus.ExponentialBuckets(30, 2, 14),
	})
	metricOrderC1Seconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "sealfleet_remote_seal_c1_seconds", Help: "Time from a partner's seed (commit1) reaching the batch to the sector's C1 output being written.",
		Buckets: prometheus.ExponentialBuckets(5, 2, 14),
	})
	metricQualifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sealfleet_qualifications_total", Help: "Node qualifications ended, by outcome (measured, failed).",
	}, []string{"outcome"})
	metricNodeDeviceIOPS = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_node_layer_device_read_iops", Help: "4 KiB random reads per second a layer device served in the node's last qualification.",
	}, []string{"node", "device"})
	metricNodeDeviceBandwidth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_node_layer_device_bytes_per_second", Help: "Sequential bandwidth of a layer device in the node's last qualification (op: read, write).",
	}, []string{"node", "device", "op"})
	metricNodeHashRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_node_hash_labels_per_second_per_thread", Help: "One hasher thread's labelling bound in the node's last qualification.",
	}, []string{"node"})
	metricNodeQualified = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sealfleet_node_qualification_timestamp_seconds", Help: "When the node's last qualification measured it (Unix time).",
	}, []string{"node"})
)

func init() {
	metrics.Registry.MustRegister(metricBatches, metricPending, metricPendingNoFit, metricPlacementLatency,
		metricScheduleCycle, metricSlots, metricReleaseFailures, metricBatchTransitions,
		metricBatchPhaseSeconds, metricBatchProgress, metricBatchRate, metricBatchPredictedRate, metricQualifications,
		metricNodeDeviceIOPS, metricNodeDeviceBandwidth, metricNodeHashRate, metricNodeQualified,
		metricRemoteSealRequests, metricOrderCompleteSeconds, metricOrderC1Seconds, metricSectorFailures)
}

// exportBatchMetrics sets the per-phase counts and, for batches not yet finished, how long
// they have been in their phase (what the "stuck in a phase" alert reads).
func exportBatchMetrics(batches []sealv1.SealBatch) {
	counts := map[sealv1.SealBatchPhase]int{}
	var running []phaseEntry
	for i := range batches {
		b := &batches[i]
		phase := b.Status.Phase
		if phase == "" {
			phase = sealv1.PhasePending
		}
		counts[phase]++
		if phase.Final() {
			continue
		}
		since := b.CreationTimestamp.Time
		if c := phaseSince(b); !c.IsZero() {
			since = c
		}
		running = append(running, phaseEntry{since: since, labels: []string{b.Namespace, b.Name, string(phase),
			b.Status.Node, string(b.Spec.SectorSize), strconv.Itoa(len(b.Spec.Sectors))}})
	}
	metricBatchPhaseSeconds.set(running)
	for _, p := range sealv1.Phases {
		metricBatches.WithLabelValues(string(p)).Set(float64(counts[p]))
	}
}

// phaseSince estimates when the batch entered its current phase from its timestamps and
// conditions.
func phaseSince(b *sealv1.SealBatch) time.Time {
	switch b.Status.Phase {
	case sealv1.PhasePlaced:
		if b.Status.PlacedTime != nil {
			return b.Status.PlacedTime.Time
		}
	case sealv1.PhasePC1:
		if b.Status.StartTime != nil {
			return b.Status.StartTime.Time
		}
	case sealv1.PhasePC2:
		if c := meta.FindStatusCondition(b.Status.Conditions, sealv1.CondPC1Complete); c != nil && c.Status == metav1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// phaseClock exports each unfinished batch's time in its phase, computed when scraped: the
// batches are snapshotted on every scheduling cycle, but a stuck batch triggers no cycle, and
// a gauge set only then would stop growing exactly when the stuck-in-phase alert needs it.
type phaseClock struct {
	desc *prometheus.Desc
	now  func() time.Time // nil: time.Now

	mu      sync.Mutex
	entries []phaseEntry
}

type phaseEntry struct {
	since  time.Time
	labels []string
}

func (c *phaseClock) set(entries []phaseEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = entries
}

// Describe implements prometheus.Collector.
func (c *phaseClock) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *phaseClock) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, now.Sub(e.since).Seconds(), e.labels...)
	}
}

// exportSlotMetrics sets each node's used and free slots from placement's view.
func exportSlotMetrics(fleet []*placement.Node) {
	metricSlots.Reset()
	for _, n := range fleet {
		used := n.Usage.Slots()
		metricSlots.WithLabelValues(n.Sealer.Name, "used").Set(float64(used))
		metricSlots.WithLabelValues(n.Sealer.Name, "free").Set(float64(max(int(n.Geometry.Count)-used, 0)))
		metricSlots.WithLabelValues(n.Sealer.Name, "dirty").Set(float64(n.Usage.Dirty()))
	}
}

// exportQualificationMetrics publishes every node's last qualification (from its status, so
// an operator restart loses nothing).
func exportQualificationMetrics(fleet []*placement.Node) {
	metricNodeDeviceIOPS.Reset()
	metricNodeDeviceBandwidth.Reset()
	metricNodeHashRate.Reset()
	metricNodeQualified.Reset()
	for _, n := range fleet {
		q := n.Sealer.Status.Qualification
		if q == nil || q.MeasuredTime == nil {
			continue
		}
		node := n.Sealer.Name
		metricNodeQualified.WithLabelValues(node).Set(float64(q.MeasuredTime.Unix()))
		if q.LabelsPerSecondPerThread > 0 {
			metricNodeHashRate.WithLabelValues(node).Set(float64(q.LabelsPerSecondPerThread))
		}
		for _, d := range q.LayerDevices {
			if d.Error != "" {
				continue
			}
			metricNodeDeviceIOPS.WithLabelValues(node, d.Path).Set(float64(d.RandomReadIOPS))
			metricNodeDeviceBandwidth.WithLabelValues(node, d.Path, "read").Set(float64(d.SeqReadBytesPerSecond))
			if d.WriteSkipped == "" {
				metricNodeDeviceBandwidth.WithLabelValues(node, d.Path, "write").Set(float64(d.SeqWriteBytesPerSecond))
			}
		}
	}
}

// exportRates sets a running batch's measured and predicted PC1 rates (PC1 only; a stalled
// batch reports 0, which is what the below-prediction alert must see).
func exportRates(b *sealv1.SealBatch, rep *ProgressReport) {
	if rep == nil || rep.Phase != "pc1" || rep.Rate < 0 {
		return
	}
	metricBatchRate.WithLabelValues(b.Namespace, b.Name, b.Status.Node).Set(rep.Rate)
	if p := b.Status.Prediction; p != nil && p.LabelsPerSecond > 0 {
		metricBatchPredictedRate.WithLabelValues(b.Namespace, b.Name, b.Status.Node, p.Bottleneck).Set(float64(p.LabelsPerSecond))
	}
}

// forgetRates drops a batch's rate series once it has left PC1.
func forgetRates(b *sealv1.SealBatch) {
	metricBatchRate.DeleteLabelValues(b.Namespace, b.Name, b.Status.Node)
	metricBatchPredictedRate.DeletePartialMatch(prometheus.Labels{"namespace": b.Namespace, "batch": b.Name})
}
