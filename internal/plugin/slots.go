package plugin

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/ledger"
)

// Slot states in the slots table.
const (
	slotHeld = "held"
	slotFree = "free"
	// slotDirty: released by its batch, not scrubbed yet (no batch is placed on it until then).
	slotDirty = "dirty"
)

// fleetBook is the ledger's view of the fleet: every node's geometry and what the batches
// placed on it hold, derived from the batches' status as the operator derives it.
type fleetBook struct {
	geometry map[string]ledger.Geometry
	book     ledger.Book
	batches  map[string]*sealv1.SealBatch // by ledger.BatchKey
}

func newFleetBook(nodes []sealv1.SealerNode, batches []sealv1.SealBatch) *fleetBook {
	fb := &fleetBook{
		geometry: make(map[string]ledger.Geometry, len(nodes)),
		batches:  make(map[string]*sealv1.SealBatch, len(batches)),
	}
	for i := range nodes {
		fb.geometry[nodes[i].Name] = ledger.GeometryOf(&nodes[i])
	}
	for i := range batches {
		fb.batches[ledger.BatchKey(&batches[i])] = &batches[i]
	}
	fb.book = ledger.BookOf(batches, nil, func(node string) ledger.Geometry { return fb.geometry[node] })
	fb.book.AddDirty(nodes)
	return fb
}

// overlaps is the ledger's test for two slot ranges sharing a byte.
func overlaps(a, b sealv1.SlotRange) bool {
	return a.OffsetBytes < b.OffsetBytes+b.LengthBytes && b.OffsetBytes < a.OffsetBytes+a.LengthBytes
}

// nodeSlots is one node's slots and the claims on it that hold none of them.
type nodeSlots struct {
	// holders[i] are the claims whose range overlaps slot i (more than one is a double booking).
	holders [][]ledger.Claim
	// noSlot are updates (they hold CPUs, not a slot); stray are claims whose range lies in
	// no slot of the current geometry (the geometry changed under a held slot, or the node
	// has no SealerNode).
	noSlot, stray []ledger.Claim
}

func (fb *fleetBook) slotsOf(node string) nodeSlots {
	g := fb.geometry[node]
	ns := nodeSlots{holders: make([][]ledger.Claim, g.Count)}
	var claims []ledger.Claim
	if u := fb.book[node]; u != nil {
		claims = u.Claims
	}
	for _, c := range claims {
		if c.Slot == ledger.NoSlot {
			ns.noSlot = append(ns.noSlot, c)
			continue
		}
		placed := false
		for i := int32(0); i < g.Count; i++ {
			if overlaps(c.Range, g.Range(i)) {
				ns.holders[i] = append(ns.holders[i], c)
				placed = true
			}
		}
		if !placed {
			ns.stray = append(ns.stray, c)
		}
	}
	return ns
}

// counts splits the node's occupied slots: held by a batch, or dirty (only released claims
// on it: no batch holds it, yet none can be placed on it before its scrub).
func (ns nodeSlots) counts() (held, dirty int) {
	for _, h := range ns.holders {
		switch {
		case slices.ContainsFunc(h, func(c ledger.Claim) bool { return !c.Dirty }):
			held++
		case len(h) > 0:
			dirty++
		}
	}
	return held, dirty
}

// SlotRow is one row of `slots`: a layer slot of a node, or a claim that holds no slot.
type SlotRow struct {
	Node string `json:"node"`
	// Slot is the slot's index; -1 (ledger.NoSlot) for an update, which holds CPUs but no slot.
	Slot int32 `json:"slot"`
	// State is held, dirty (released, waiting for its scrub) or free.
	State string `json:"state"`
	// Batch is the holder as <namespace>/<name>; Phase its phase.
	Batch string `json:"batch,omitempty"`
	Phase string `json:"phase,omitempty"`
	// PlacedTime is the holder's status.placedTime; HeldFor the time since, as kubectl
	// prints ages.
	PlacedTime *metav1.Time `json:"placedTime,omitempty"`
	HeldFor    string       `json:"heldFor,omitempty"`
}

// SlotRows lists every slot of every node (only `node` when set; nodes by name, slots by
// index), then the node's claims that hold no slot, as SlotRows. A slot held by two batches
// (a double booking) gives a row for each.
func SlotRows(nodes []sealv1.SealerNode, batches []sealv1.SealBatch, node string, now time.Time) []SlotRow {
	fb := newFleetBook(nodes, batches)
	names := make([]string, 0, len(fb.geometry))
	for n := range fb.geometry {
		if node == "" || n == node {
			names = append(names, n)
		}
	}
	// Claims on nodes without a SealerNode still hold what their batches recorded.
	for n := range fb.book {
		if _, known := fb.geometry[n]; !known && (node == "" || n == node) && len(fb.book[n].Claims) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var rows []SlotRow
	for _, n := range names {
		ns := fb.slotsOf(n)
		for i, holders := range ns.holders {
			if len(holders) == 0 {
				rows = append(rows, SlotRow{Node: n, Slot: int32(i), State: slotFree})
				continue
			}
			for _, c := range holders {
				rows = append(rows, fb.heldRow(n, int32(i), c, now))
			}
		}
		for _, c := range sortedClaims(ns.stray) {
			rows = append(rows, fb.heldRow(n, c.Slot, c, now))
		}
		for _, c := range sortedClaims(ns.noSlot) {
			rows = append(rows, fb.heldRow(n, ledger.NoSlot, c, now))
		}
	}
	return rows
}

func sortedClaims(cs []ledger.Claim) []ledger.Claim {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Slot != cs[j].Slot {
			return cs[i].Slot < cs[j].Slot
		}
		return cs[i].Batch < cs[j].Batch
	})
	return cs
}

func (fb *fleetBook) heldRow(node string, slot int32, c ledger.Claim, now time.Time) SlotRow {
	r := SlotRow{Node: node, Slot: slot, State: slotHeld, Batch: c.Batch}
	if c.Dirty {
		r.State, r.Phase = slotDirty, "waiting for its scrub"
		return r
	}
	if b := fb.batches[c.Batch]; b != nil {
		r.Phase = string(phaseOf(b))
		if t := b.Status.PlacedTime; t != nil {
			r.PlacedTime = t.DeepCopy()
			r.HeldFor = age(now.Sub(t.Time))
		}
	}
	return r
}

func hasNode(nodes []sealv1.SealerNode, name string) bool {
	for i := range nodes {
		if nodes[i].Name == name {
			return true
		}
	}
	return false
}

// onlyHeld keeps the held rows.
func onlyHeld(rows []SlotRow) []SlotRow {
	out := rows[:0:0]
	for _, r := range rows {
		if r.State != slotFree {
			out = append(out, r)
		}
	}
	return out
}

func (a *app) slotsCommand() *cobra.Command {
	var out outputFlags
	var heldOnly bool
	cmd := &cobra.Command{
		Use:   "slots [NODE]",
		Short: "Every layer slot of every SealerNode (or of NODE): held by which batch, or free",
		Long: `One row per layer slot: NODE, SLOT, STATE (held or free), BATCH (namespace/name),
PHASE and HELD-FOR (time since the batch was placed). A slot whose batch released it but whose
scrub has not run yet is STATE dirty: no batch is placed on it until the scrub succeeds (its
BATCH is the one that left it). Updates (SnapDeals) hold CPUs but no
slot: they show as SLOT "-". Derived from the SealBatches' status, as the operator derives
it, not from SealerNode status.freeSlots (the node agent's last scan).

-o json prints the rows as a list, slot -1 standing for "-".`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			node := ""
			if len(args) == 1 {
				node = args[0]
			}
			c, err := a.kubeClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			nodes, batches, err := fleet(ctx, c)
			if err != nil {
				return err
			}
			rows := SlotRows(nodes, batches, node, a.env.Now())
			if node != "" && len(rows) == 0 && !hasNode(nodes, node) {
				return fmt.Errorf("SealerNode %s not found: kubectl get sealernodes lists them", node)
			}
			if heldOnly {
				rows = onlyHeld(rows)
			}
			if out.format != "" {
				if rows == nil {
					rows = []SlotRow{}
				}
				return out.print(a.env.Out, rows)
			}
			t := newTable(a.env.Out, out.noHeaders)
			t.header("NODE", "SLOT", "STATE", "BATCH", "PHASE", "HELD-FOR")
			for _, r := range rows {
				slot := "-"
				if r.Slot != ledger.NoSlot {
					slot = fmt.Sprint(r.Slot)
				}
				t.row(r.Node, slot, r.State, r.Batch, r.Phase, r.HeldFor)
			}
			return t.flush()
		},
	}
	out.add(cmd, "json", "yaml")
	cmd.Flags().BoolVar(&heldOnly, "held", false, "only the held and dirty slots (and updates, which hold no slot)")
	return cmd
}
