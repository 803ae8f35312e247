package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels on sealfleet's pods that the targets are found by.
const (
	componentLabel = "app.kubernetes.io/component"
	batchLabel     = "sealfleet.io/batch"
)

// scrapeComponents are the components with a target file each (<component>.json).
var scrapeComponents = []string{"operator", "node-agent", "sealer"}

// hostNetworkIP is the only pod IP targets are taken from: the local cluster's real node
// runs sealfleet on the host network, where Prometheus on the same host can reach it.
const hostNetworkIP = "127.0.0.1"

// TargetGroup is one Prometheus file_sd entry.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// ScrapeTargets finds the metrics endpoints of the Running sealfleet pods on the host
// network: the first container port named "metrics" (or unnamed; any port for a sealer),
// labelled with namespace, pod, node, and for a sealer its batch. Every component has an
// entry, empty when it has no pod.
func ScrapeTargets(pods []corev1.Pod) map[string][]TargetGroup {
	out := make(map[string][]TargetGroup, len(scrapeComponents))
	for _, c := range scrapeComponents {
		out[c] = []TargetGroup{}
	}
	sorted := append([]corev1.Pod{}, pods...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Namespace != sorted[j].Namespace {
			return sorted[i].Namespace < sorted[j].Namespace
		}
		return sorted[i].Name < sorted[j].Name
	})
	for i := range sorted {
		p := &sorted[i]
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP != hostNetworkIP {
			continue
		}
		comp := p.Labels[componentLabel]
		if _, ok := out[comp]; !ok {
			continue
		}
		port, ok := metricsPort(p, comp == "sealer")
		if !ok {
			continue
		}
		labels := map[string]string{"namespace": p.Namespace, "pod": p.Name, "node": p.Spec.NodeName}
		if comp == "sealer" {
			labels["batch"] = p.Labels[batchLabel]
		}
		out[comp] = append(out[comp], TargetGroup{
			Targets: []string{net.JoinHostPort(hostNetworkIP, strconv.Itoa(int(port)))},
			Labels:  labels,
		})
	}
	return out
}

// metricsPort is the first container port named "metrics" or unnamed, or with anyPort the
// first port at all.
func metricsPort(p *corev1.Pod, anyPort bool) (int32, bool) {
	for _, c := range p.Spec.Containers {
		for _, pt := range c.Ports {
			if anyPort || pt.Name == "metrics" || pt.Name == "" {
				return pt.ContainerPort, true
			}
		}
	}
	return 0, false
}

// writeTargetFiles writes <component>.json into dir, each as a .tmp file renamed over the
// old one, so that Prometheus never reads a half-written file.
func writeTargetFiles(dir string, targets map[string][]TargetGroup) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, comp := range scrapeComponents {
		data, err := json.Marshal(targets[comp])
		if err != nil {
			return err
		}
		final := filepath.Join(dir, comp+".json")
		tmp := final + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, final); err != nil {
			return err
		}
	}
	return nil
}

// refreshTargets lists the pods once and rewrites the files.
func refreshTargets(ctx context.Context, c client.Reader, dir string) (int, error) {
	pods, err := listPods(ctx, c)
	if err != nil {
		return 0, err
	}
	targets := ScrapeTargets(pods)
	if err := writeTargetFiles(dir, targets); err != nil {
		return 0, fmt.Errorf("writing the target files in %s: %w", dir, err)
	}
	n := 0
	for _, t := range targets {
		n += len(t)
	}
	return n, nil
}

func (a *app) scrapeTargetsCommand() *cobra.Command {
	var dir string
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "scrape-targets --dir DIR [--watch 2s]",
		Short: "Write Prometheus file_sd target files for the operator, node agent and sealer pods",
		Long: `Write operator.json, node-agent.json and sealer.json into DIR as Prometheus file_sd
target files (each written to a .tmp file, then renamed), from the Running pods of every
namespace on the host network (pod IP 127.0.0.1) with label app.kubernetes.io/component
operator, node-agent or sealer: each pod's first container port named "metrics" (or
unnamed; a sealer's first port), labelled namespace, pod, node, and batch for sealers.

--watch repeats every interval until interrupted; a failed round is reported and retried.`,
		Example: `  kubectl sealfleet scrape-targets --dir _out/prometheus/sd --watch 2s`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--dir DIR: the directory Prometheus' file_sd_configs read")
			}
			if watch < 0 {
				return fmt.Errorf("--watch %s: give a positive interval such as 2s", watch)
			}
			c, err := a.kubeClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			n, err := refreshTargets(ctx, c, dir)
			if watch == 0 {
				if err == nil {
					fmt.Fprintf(a.env.Out, "%d targets written to %s\n", n, dir)
				}
				return err
			}
			for {
				if ctx.Err() != nil {
					return nil // interrupted: the files on disk are complete
				}
				if err != nil {
					fmt.Fprintf(a.env.Err, "%v (retrying in %s)\n", err, watch)
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(watch):
				}
				_, err = refreshTargets(ctx, c, dir)
			}
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write operator.json, node-agent.json and sealer.json into")
	cmd.Flags().DurationVar(&watch, "watch", 0, "rewrite the files at this interval until interrupted")
	return cmd
}
