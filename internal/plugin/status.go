package plugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// unavailableRows caps the not-Ready/cordoned table; -o json lists them all.
const unavailableRows = 20

// sealedWindow is how far back "sectors sealed recently" looks.
const sealedWindow = time.Hour

// FleetStatus is `status -o json`: the fleet as its SealerNodes and SealBatches show it.
type FleetStatus struct {
	Nodes        NodeCounts          `json:"nodes"`
	Slots        SlotCounts          `json:"slots"`
	Hugepages1Gi HugepageCounts      `json:"hugepages1Gi"`
	ParentCaches []ParentCacheCounts `json:"parentCaches"`
	Batches      BatchCounts         `json:"batches"`
}

// NodeCounts counts the SealerNodes.
type NodeCounts struct {
	Total    int `json:"total"`
	Ready    int `json:"ready"`
	Cordoned int `json:"cordoned"`
	// Unavailable are the nodes not Ready or cordoned, by name.
	Unavailable []UnavailableNode `json:"unavailable"`
}

// UnavailableNode is a node that takes no new batch, and why.
type UnavailableNode struct {
	Name string `json:"name"`
	// Ready is the Ready condition's status (True, False, or Unknown when the agent has not
	// reported it); Reason and Message are the condition's.
	Ready    string `json:"ready"`
	Cordoned bool   `json:"cordoned"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
}

// SlotCounts counts layer slots over the fleet.
type SlotCounts struct {
	// Total sums the nodes' status.slots.count.
	Total int64 `json:"total"`
	// Held is the slots batches hold, from the batches' status (the only record); Dirty the
	// slots released but not scrubbed yet (the SealerNodes' status.dirtySlots); Free is per
	// node what the two leave.
	Held  int64 `json:"held"`
	Dirty int64 `json:"dirty"`
	Free  int64 `json:"free"`
	// HeldOnUnknownNodes counts slots held by batches on nodes with no SealerNode.
	HeldOnUnknownNodes int64 `json:"heldOnUnknownNodes"`
}

// HugepageCounts sums 1 GiB hugepages over the nodes' NUMA nodes.
type HugepageCounts struct {
	Total int64 `json:"total"`
	Free  int64 `json:"free"`
}

// ParentCacheCounts is, for one registered proof, on how many nodes its parent cache is
// verified and on how many it is being built.
type ParentCacheCounts struct {
	Proof    string `json:"proof"`
	Verified int    `json:"verified"`
	Building int    `json:"building"`
}

// BatchCounts counts the SealBatches in all namespaces.
type BatchCounts struct {
	Total int `json:"total"`
	// ByPhase has every phase (0 when none); a batch with no phase yet counts as Pending.
	ByPhase map[string]int `json:"byPhase"`
	// SectorsSealedLastHour sums the sectors of batches Completed within the last hour.
	SectorsSealedLastHour int `json:"sectorsSealedLastHour"`
}

// Summarize computes the fleet status from one list of nodes and one of batches.
func Summarize(nodes []sealv1.SealerNode, batches []sealv1.SealBatch, now time.Time) FleetStatus {
	s := FleetStatus{
		Nodes:        NodeCounts{Total: len(nodes), Unavailable: []UnavailableNode{}},
		ParentCaches: []ParentCacheCounts{},
		Batches:      BatchCounts{Total: len(batches), ByPhase: map[string]int{}},
	}
	fb := newFleetBook(nodes, batches)
	caches := map[string]*ParentCacheCounts{}
	for i := range nodes {
		n := &nodes[i]
		ready := meta.FindStatusCondition(n.Status.Conditions, sealv1.CondReady)
		isReady := ready != nil && ready.Status == metav1.ConditionTrue
		if isReady {
			s.Nodes.Ready++
		}
		if n.Spec.Cordon {
			s.Nodes.Cordoned++
		}
		if !isReady || n.Spec.Cordon {
			u := UnavailableNode{Name: n.Name, Ready: string(metav1.ConditionUnknown), Cordoned: n.Spec.Cordon}
			if ready != nil {
				u.Ready, u.Reason, u.Message = string(ready.Status), ready.Reason, ready.Message
			}
			s.Nodes.Unavailable = append(s.Nodes.Unavailable, u)
		}

		var count int64
		if n.Status.Slots != nil {
			count = int64(n.Status.Slots.Count)
		}
		held, dirty := fb.slotsOf(n.Name).counts()
		s.Slots.Total += count
		s.Slots.Held += int64(held)
		s.Slots.Dirty += int64(dirty)
		s.Slots.Free += max(count-int64(held+dirty), 0)

		for _, numa := range n.Status.NUMANodes {
			for _, h := range numa.Hugepages {
				if h.PageSize == "1Gi" {
					s.Hugepages1Gi.Total += h.Total
					s.Hugepages1Gi.Free += h.Free
				}
			}
		}
		for _, pc := range n.Status.ParentCaches {
			c := caches[pc.Proof]
			if c == nil {
				c = &ParentCacheCounts{Proof: pc.Proof}
				caches[pc.Proof] = c
			}
			if pc.Verified {
				c.Verified++
			}
			if pc.Building {
				c.Building++
			}
		}
	}
	for node, u := range fb.book {
		if _, known := fb.geometry[node]; !known {
			for _, c := range u.Claims {
				if c.Slot >= 0 {
					s.Slots.HeldOnUnknownNodes++
				}
			}
		}
	}
	sort.Slice(s.Nodes.Unavailable, func(i, j int) bool { return s.Nodes.Unavailable[i].Name < s.Nodes.Unavailable[j].Name })
	for _, c := range caches {
		s.ParentCaches = append(s.ParentCaches, *c)
	}
	sort.Slice(s.ParentCaches, func(i, j int) bool { return s.ParentCaches[i].Proof < s.ParentCaches[j].Proof })

	for _, p := range allPhases {
		s.Batches.ByPhase[string(p)] = 0
	}
	for i := range batches {
		b := &batches[i]
		phase := phaseOf(b)
		s.Batches.ByPhase[string(phase)]++
		if t := b.Status.CompletionTime; phase == sealv1.PhaseCompleted && t != nil && now.Sub(t.Time) <= sealedWindow {
			s.Batches.SectorsSealedLastHour += len(b.Status.Sectors)
		}
	}
	return s
}

// fleet lists every SealerNode and every SealBatch in all namespaces, both at once.
func fleet(ctx context.Context, c client.Reader) ([]sealv1.SealerNode, []sealv1.SealBatch, error) {
	var nodes []sealv1.SealerNode
	var batches []sealv1.SealBatch
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { nodes, err = listNodes(ctx, c); return })
	g.Go(func() (err error) { batches, err = listBatches(ctx, c); return })
	return nodes, batches, g.Wait()
}

// writeStatus prints the summary lines, the unavailable nodes and the parent caches.
func writeStatus(w io.Writer, s FleetStatus, noHeaders bool) error {
	var phases []string
	for _, p := range allPhases {
		if n := s.Batches.ByPhase[string(p)]; n > 0 {
			phases = append(phases, fmt.Sprintf("%d %s", n, p))
		}
	}
	// Phases the operator may add later than this plugin still show.
	var other []string
	for p, n := range s.Batches.ByPhase {
		if !isKnownPhase(p) && n > 0 {
			other = append(other, fmt.Sprintf("%d %s", n, p))
		}
	}
	sort.Strings(other)
	phases = append(phases, other...)
	byPhase := ""
	if len(phases) > 0 {
		byPhase = ": " + strings.Join(phases, ", ")
	}
	slots := fmt.Sprintf("%d total, %d held, %d free", s.Slots.Total, s.Slots.Held, s.Slots.Free)
	if s.Slots.Dirty > 0 {
		slots = fmt.Sprintf("%d total, %d held, %d waiting for their scrub, %d free", s.Slots.Total, s.Slots.Held, s.Slots.Dirty, s.Slots.Free)
	}
	if s.Slots.HeldOnUnknownNodes > 0 {
		slots += fmt.Sprintf(" (and %d held on nodes without a SealerNode)", s.Slots.HeldOnUnknownNodes)
	}

	sum := newTable(w, false)
	sum.row("NODES", fmt.Sprintf("%d SealerNodes, %d Ready, %d cordoned", s.Nodes.Total, s.Nodes.Ready, s.Nodes.Cordoned))
	sum.row("SLOTS", slots)
	sum.row("HUGEPAGES", fmt.Sprintf("1Gi: %d total, %d free", s.Hugepages1Gi.Total, s.Hugepages1Gi.Free))
	sum.row("BATCHES", fmt.Sprintf("%d%s", s.Batches.Total, byPhase))
	sum.row("SEALED", fmt.Sprintf("%d sectors in the last hour", s.Batches.SectorsSealedLastHour))
	if err := sum.flush(); err != nil {
		return err
	}

	if len(s.Nodes.Unavailable) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, noHeaders)
		t.header("NODE", "READY", "CORDONED", "REASON", "MESSAGE")
		for i, n := range s.Nodes.Unavailable {
			if i == unavailableRows {
				break
			}
			t.row(n.Name, n.Ready, fmt.Sprint(n.Cordoned), n.Reason, n.Message)
		}
		if err := t.flush(); err != nil {
			return err
		}
		if more := len(s.Nodes.Unavailable) - unavailableRows; more > 0 {
			fmt.Fprintf(w, "... and %d more not Ready or cordoned (-o json lists them all)\n", more)
		}
	}

	if len(s.ParentCaches) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, noHeaders)
		t.header("PARENT CACHE", "VERIFIED", "BUILDING")
		for _, c := range s.ParentCaches {
			t.row(c.Proof, fmt.Sprint(c.Verified), fmt.Sprint(c.Building))
		}
		return t.flush()
	}
	return nil
}

func isKnownPhase(p string) bool {
	for _, k := range allPhases {
		if string(k) == p {
			return true
		}
	}
	return false
}

func (a *app) statusCommand() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The fleet at a glance: nodes, layer slots, hugepages, parent caches, batches",
		Long: `The fleet at a glance, from one list of SealerNodes and one of SealBatches (all
namespaces):
  nodes         total, Ready (condition Ready True), cordoned; each node not Ready or
                cordoned with its Ready condition's reason and message (the first 20)
  slots         total (status.slots.count summed), held (derived from the batches' status,
                as the operator derives it), free
  hugepages     1 GiB pages, total and free, over every NUMA node
  parent caches per proof: on how many nodes verified, on how many building
  batches       count per phase (no phase yet counts as Pending), and the sectors of the
                batches Completed in the last hour

-o json or -o yaml prints all of it, every unavailable node included.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, err := a.kubeClient()
			if err != nil {
				return err
			}
			nodes, batches, err := fleet(cmd.Context(), c)
			if err != nil {
				return err
			}
			s := Summarize(nodes, batches, a.env.Now())
			if out.format != "" {
				return out.print(a.env.Out, s)
			}
			return writeStatus(a.env.Out, s, out.noHeaders)
		},
	}
	out.add(cmd, "json", "yaml")
	return cmd
}
