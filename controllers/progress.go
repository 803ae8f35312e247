package controllers

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/commcid"
	"github.com/sealfleet/sealfleet/internal/render"
)

// ProgressReport is the sealer's /progress document (sealer-image/README.md).
type ProgressReport struct {
	Phase      string  `json:"phase"`
	Layer      int32   `json:"layer"`
	Layers     int32   `json:"layers"`
	Percent    float64 `json:"percent"`
	Rate       float64 `json:"rate_labels_per_s"`
	ETASeconds float64 `json:"eta_seconds"`
	// CPUs is where the sealer's threads are pinned (absent until PC1 starts).
	CPUs *CPUReport `json:"cpus,omitempty"`
}

// CPUReport is the sealer's `cpus` object: its grant, the L3 groups it uses, and the layout
// CPUs it moved onto granted ones (decimal strings → CPU).
type CPUReport struct {
	Granted  string         `json:"granted"`
	L3Groups []string       `json:"l3_groups"`
	Moved    map[string]int `json:"moved"`
}

func (c *CPUReport) toStatus() *sealv1.RunningCPUs {
	out := &sealv1.RunningCPUs{Granted: c.Granted, L3Groups: c.L3Groups}
	for from, to := range c.Moved {
		if n, err := strconv.Atoi(from); err == nil {
			out.Moves = append(out.Moves, sealv1.CPUMove{Layout: int32(n), Granted: int32(to)})
		}
	}
	slices.SortFunc(out.Moves, func(a, b sealv1.CPUMove) int { return cmp.Compare(a.Layout, b.Layout) })
	return out
}

func (p *ProgressReport) toStatus(now *metav1.Time) *sealv1.Progress {
	return &sealv1.Progress{
		Phase: p.Phase, Layer: p.Layer, Layers: p.Layers,
		Percent:         strconv.FormatFloat(p.Percent, 'f', 1, 64),
		LabelsPerSecond: int64(p.Rate), ETASeconds: int64(p.ETASeconds), UpdateTime: now,
	}
}

// ProgressSource reads a running sealer's progress.
type ProgressSource interface {
	Read(ctx context.Context, pod *corev1.Pod, port int) (*ProgressReport, error)
}

// httpProgress GETs http://<podIP>:<port>/progress.
type httpProgress struct{}

var progressClient = &http.Client{Timeout: 3 * time.Second}

func (httpProgress) Read(ctx context.Context, pod *corev1.Pod, port int) (*ProgressReport, error) {
	if pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s has no IP yet", pod.Name)
	}
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + "/progress"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := progressClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	var rep ProgressReport
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep); err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return &rep, nil
}

// Results is the sealer's results.json / termination message.
type Results struct {
	Sectors []SectorResult `json:"sectors"`
	// Timings are the run's PC1 and PC2 wall times as the sealer measured them (sealer batch).
	Timings *Timings `json:"timings,omitempty"`
}

// Timings are a sealer run's phase times in seconds.
type Timings struct {
	PC1Seconds float64 `json:"pc1_seconds"`
	PC2Seconds float64 `json:"pc2_seconds"`
}

// recordMeasured puts the run's measured times beside the prediction placement made.
func (r *Results) recordMeasured(b *sealv1.SealBatch) {
	if r.Timings == nil {
		return
	}
	if b.Status.Prediction == nil {
		b.Status.Prediction = &sealv1.Prediction{}
	}
	if r.Timings.PC1Seconds > 0 {
		b.Status.Prediction.MeasuredPC1Seconds = fmt.Sprintf("%.1f", r.Timings.PC1Seconds)
	}
	if r.Timings.PC2Seconds > 0 {
		b.Status.Prediction.MeasuredPC2Seconds = fmt.Sprintf("%.1f", r.Timings.PC2Seconds)
	}
}

// SectorResult is one sector's commitments, hex in rust-fil-proofs byte order: a seal's, or
// an update's (the *_new and comm_r_old keys of `sealer snap`).
type SectorResult struct {
	SectorID  int64  `json:"sector_id"`
	ReplicaID string `json:"replica_id"`
	CommD     string `json:"comm_d"`
	CommC     string `json:"comm_c"`
	CommRLast string `json:"comm_r_last"`
	CommR     string `json:"comm_r"`

	CommDNew     string `json:"comm_d_new"`
	CommROld     string `json:"comm_r_old"`
	CommRLastNew string `json:"comm_r_last_new"`
	CommRNew     string `json:"comm_r_new"`

	// Failed says why the sealer left the sector out of the batch (a check of its own failed
	// before PC1: its data file, pieces, commD or output directory) or gave it up later (its
	// data or output files in PC2, its proofs, or its outputs failed the audit before handoff:
	// WindowPoSt proofs and spot checks); FailureClass is the kind (input, data-mismatch, io,
	// audit). The other sectors were sealed; a failed sector's files were deleted.
	Failed       string `json:"failed"`
	FailureClass string `json:"failure_class"`
}

// UnmarshalJSON reads either form; an update's new commitments become commD, commRLast and
// commR (what the sector holds now), its old commR stays in CommROld.
func (s *SectorResult) UnmarshalJSON(data []byte) error {
	type plain SectorResult
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if p.CommRNew != "" {
		p.CommD, p.CommRLast, p.CommR = p.CommDNew, p.CommRLastNew, p.CommRNew
	}
	*s = SectorResult(p)
	return nil
}

// matches checks that the results cover exactly the batch's sectors.
func (r *Results) matches(b *sealv1.SealBatch) error {
	want := make(map[int64]bool, len(b.Spec.Sectors))
	for _, s := range b.Spec.Sectors {
		want[s.Number] = true
	}
	for _, s := range r.Sectors {
		if !want[s.SectorID] {
			return fmt.Errorf("sealer reported sector %d, which is not in the batch", s.SectorID)
		}
		if s.Failed != "" {
			delete(want, s.SectorID) // left out with its reason: it has no commitments
			continue
		}
		if _, err := render.Bytes32("comm_r", s.CommR); err != nil {
			return fmt.Errorf("sealer reported no valid comm_r for sector %d: %w", s.SectorID, err)
		}
		if _, err := render.Bytes32("comm_d", s.CommD); err != nil {
			return fmt.Errorf("sealer reported no valid comm_d for sector %d: %w", s.SectorID, err)
		}
		delete(want, s.SectorID)
	}
	if len(want) > 0 {
		return fmt.Errorf("sealer reported results for %d of %d sectors", len(r.Sectors), len(b.Spec.Sectors))
	}
	if len(r.failed()) == len(r.Sectors) {
		return fmt.Errorf("sealer exited 0 but left every sector out")
	}
	return nil
}

// toStatus is the per-sector status, with commD and commR also as CIDs (matches has
// checked both are 32 bytes of hex).
func (r *Results) toStatus() []sealv1.SectorStatus {
	out := make([]sealv1.SectorStatus, 0, len(r.Sectors))
	for _, s := range r.Sectors {
		if s.Failed != "" {
			out = append(out, sealv1.SectorStatus{Number: s.SectorID, State: stateFailed, Reason: s.Failed})
			continue
		}
		st := sealv1.SectorStatus{Number: s.SectorID, ReplicaID: s.ReplicaID, CommD: s.CommD,
			CommC: s.CommC, CommRLast: s.CommRLast, CommR: s.CommR, CommROld: s.CommROld, State: "Sealed"}
		if s.CommROld != "" {
			st.State = "Updated"
		}
		if d, err := render.Bytes32("comm_d", s.CommD); err == nil {
			st.CommDCID, _ = commcid.PieceCID(d)
		}
		if c, err := render.Bytes32("comm_r", s.CommR); err == nil {
			st.CommRCID, _ = commcid.SealedCID(c)
		}
		out = append(out, st)
	}
	return out
}

// failed is the sectors the sealer left out, in batch order.
func (r *Results) failed() []SectorResult {
	var out []SectorResult
	for _, s := range r.Sectors {
		if s.Failed != "" {
			out = append(out, s)
		}
	}
	return out
}

// ResultsSource reads a finished sealer's results when its termination message (4 KiB at
// most) could not hold them.
type ResultsSource interface {
	Read(ctx context.Context, pod *corev1.Pod) ([]byte, error)
}

// resultsLinePrefix marks the sealer's results line in its log.
const resultsLinePrefix = "SEALER_RESULTS "

// readResults takes the results from the termination message, else from the log.
func readResults(ctx context.Context, src ResultsSource, pod *corev1.Pod) (*Results, error) {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.Message != "" {
			var r Results
			if err := json.Unmarshal([]byte(t.Message), &r); err == nil && len(r.Sectors) > 0 {
				return &r, nil
			}
		}
	}
	if src == nil {
		return nil, fmt.Errorf("termination message holds no results")
	}
	data, err := src.Read(ctx, pod)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("results in the sealer log: %w", err)
	}
	return &r, nil
}

// logResults finds the results line in the sealer container's log (or, made by lines, another
// marked line in another container's).
type logResults struct {
	cs                kubernetes.Interface
	container, prefix string
}

func newLogResults(cfg *rest.Config) (*logResults, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &logResults{cs: cs, container: "sealer", prefix: resultsLinePrefix}, nil
}

// lines is a reader of the line marked prefix in container's log.
func (l *logResults) lines(container, prefix string) *logResults {
	return &logResults{cs: l.cs, container: container, prefix: prefix}
}

func (l *logResults) Read(ctx context.Context, pod *corev1.Pod) ([]byte, error) {
	tail := int64(200)
	raw, err := l.cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: l.container, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the %s log: %w", l.container, err)
	}
	return findLine(raw, l.prefix)
}

// findLine is the last line of raw starting with prefix, without it.
func findLine(raw []byte, prefix string) ([]byte, error) {
	var found []byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, prefix) {
			found = []byte(strings.TrimPrefix(line, prefix))
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %q line in the log", strings.TrimSpace(prefix))
	}
	return found, nil
}
