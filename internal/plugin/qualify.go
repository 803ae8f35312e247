package plugin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/predict"
)

// qualifyCommand asks the operator to measure a node again (sealfleet.io/qualify) and, with
// --wait, prints what it measured.
func (a *app) qualifyCommand() *cobra.Command {
	var out outputFlags
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "qualify NODE [--wait [--timeout 5m]]",
		Short: "Measure a node again: layer devices, hashing rate, hugepages, memory bandwidth",
		Long: `Asks the operator to qualify a node again by setting its SealerNode's sealfleet.io/qualify
annotation to a new value. The operator's qualification pod measures each layer device's
random reads and sequential bandwidth (writing only inside a free slot, which is scrubbed
afterwards), one thread's hashing rate, 1 GiB hugepages and memory bandwidth; placement
predicts batch times from the figures.

Without --wait it returns at once; with it, it waits for the answer and prints the figures
(-o json or -o yaml: status.qualification). Exit 2 when --timeout passes first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.kubeClient()
			if err != nil {
				return err
			}
			token := strconv.FormatInt(a.env.Now().UnixNano(), 10)
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, sealv1.AnnotationQualify, token)
			sn := &sealv1.SealerNode{}
			sn.Name = args[0]
			if err := c.Patch(ctx, sn, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return fmt.Errorf("asking SealerNode %s for a qualification: %w", args[0], err)
			}
			if !wait {
				fmt.Fprintf(a.env.Out, "sealernode/%s: qualification requested (%s=%s)\n", args[0], sealv1.AnnotationQualify, token)
				return nil
			}
			q, err := a.waitQualified(ctx, c, args[0], token, timeout)
			if err != nil {
				return err
			}
			if out.format != "" {
				return out.print(a.env.Out, q)
			}
			return writeQualification(a.env.Out, args[0], q, out.noHeaders)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the qualification and print it")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	out.add(cmd, "json", "yaml")
	return cmd
}

// waitQualified polls the node until its qualification answers token.
func (a *app) waitQualified(ctx context.Context, c client.Client, node, token string, timeout time.Duration) (*sealv1.Qualification, error) {
	deadline := a.env.Now().Add(timeout)
	for {
		var sn sealv1.SealerNode
		if err := c.Get(ctx, client.ObjectKey{Name: node}, &sn); err != nil {
			return nil, err
		}
		if q := sn.Status.Qualification; q != nil && q.Request == token {
			if q.Message != "" && len(q.LayerDevices) == 0 && q.LabelsPerSecondPerThread == 0 {
				return q, notWanted("qualification of %s failed: %s", node, q.Message)
			}
			return q, nil
		}
		if a.env.Now().After(deadline) {
			return nil, timedOut("SealerNode %s: no qualification answered %s after %s (is the node Ready? kubectl sealfleet status)", node, token, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(a.env.PollInterval):
		}
	}
}

// writeQualification prints a node's figures.
func writeQualification(w io.Writer, node string, q *sealv1.Qualification, noHeaders bool) error {
	when := ""
	if q.MeasuredTime != nil {
		when = q.MeasuredTime.UTC().Format(time.RFC3339)
	}
	head := newTable(w, false)
	head.row("SealerNode", node)
	head.row("Measured", fmt.Sprintf("%s in %.1f s by %s", when, float64(q.DurationMilliseconds)/1000, q.Tool))
	head.row("Hashing", fmt.Sprintf("%s labels/s per thread (%s)", predict.SI(float64(q.LabelsPerSecondPerThread)), q.HashKernel))
	hp := fmt.Sprintf("%d free, %d mapped", q.Hugepages1GiFree, q.Hugepages1GiMapped)
	if q.HugepagesError != "" {
		hp += ": " + q.HugepagesError
	}
	head.row("Hugepages 1Gi", hp)
	head.row("Memory copy", fmt.Sprintf("%sB/s", predict.SI(float64(q.MemoryCopyBytesPerSecond))))
	if q.GPU != "" {
		head.row("GPU", q.GPU)
	}
	if q.Message != "" {
		head.row("Message", q.Message)
	}
	if err := head.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t := newTable(w, noHeaders)
	t.header("DEVICE", "READS/S", "DEPTH", "SEQ READ", "SEQ WRITE", "DIRECT", "ERROR")
	for _, d := range q.LayerDevices {
		write := predict.SI(float64(d.SeqWriteBytesPerSecond)) + "B/s"
		if d.WriteSkipped != "" {
			write = "not measured: " + d.WriteSkipped
		}
		t.row(d.Path, predict.SI(float64(d.RandomReadIOPS)), fmt.Sprint(d.QueueDepth), predict.SI(float64(d.SeqReadBytesPerSecond))+"B/s", write, fmt.Sprint(d.Direct), d.Error)
	}
	return t.flush()
}

// predictionText is status.prediction on one line.
func predictionText(p *sealv1.Prediction) string {
	if p == nil {
		return ""
	}
	s := ""
	if p.PC1Seconds != "" {
		s = fmt.Sprintf("PC1 %s s at %s labels/s (%d%% of the hashing bound, %s)", p.PC1Seconds, predict.SI(float64(p.LabelsPerSecond)), p.RatePercent, p.Bottleneck)
	}
	if p.PC2Seconds != "" {
		s += ", PC2 " + p.PC2Seconds + " s"
		if p.PC2Bound != "" {
			s += " (bound by " + p.PC2Bound + ")"
		}
	}
	if p.ProofsSeconds != "" {
		s += ", synthetic proofs " + p.ProofsSeconds + " s"
	}
	if p.FinishTime != nil {
		s += "; done by " + p.FinishTime.UTC().Format(time.RFC3339)
	}
	if p.MeasuredPC1Seconds != "" || p.MeasuredPC2Seconds != "" {
		s += fmt.Sprintf("; measured PC1 %s s, PC2 %s s", orDash(p.MeasuredPC1Seconds), orDash(p.MeasuredPC2Seconds))
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
