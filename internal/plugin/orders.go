package plugin

import (
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
)

// OrderRow is one remote-seal order as `orders` prints it.
type OrderRow struct {
	Namespace  string `json:"namespace"`
	Order      string `json:"order"`
	Partner    string `json:"partner"`
	Sector     string `json:"sector"`
	Proof      string `json:"proof"`
	State      string `json:"state"`
	Batch      string `json:"batch,omitempty"`
	BatchPhase string `json:"batchPhase,omitempty"`
	// Notified: yes, no (not complete yet), or the refused notices so far.
	Notified string `json:"notified"`
	// C1 is the sector's C1 in its batch: C1Written, C1Failed, Abandoned, SeedMissing,
	// "seeded" (its seed is in and C1 runs or is due), or empty (no seed yet).
	C1 string `json:"c1,omitempty"`
	// Done lists what the partner said: finalize, cleanup.
	Done   string `json:"done,omitempty"`
	Reason string `json:"reason,omitempty"`
	Age    string `json:"age"`
}

// OrderRows joins each order with its batch, oldest first.
func OrderRows(orders []sealv1.SealOrder, batches []sealv1.SealBatch, now time.Time) []OrderRow {
	phase := map[string]sealv1.SealBatchPhase{}
	c1 := map[string]string{} // namespace/batch/sector → the sector's C1 state
	for _, b := range batches {
		phase[b.Namespace+"/"+b.Name] = b.Status.Phase
		for _, s := range b.Status.Sectors {
			switch s.State {
			case "C1Written", "C1Failed", "Abandoned", "SeedMissing":
				c1[fmt.Sprintf("%s/%s/%d", b.Namespace, b.Name, s.Number)] = s.State
			}
		}
	}
	sort.SliceStable(orders, func(i, j int) bool {
		return orders[i].CreationTimestamp.Before(&orders[j].CreationTimestamp)
	})
	rows := make([]OrderRow, 0, len(orders))
	for _, o := range orders {
		r := OrderRow{Namespace: o.Namespace, Order: o.Name, Partner: o.Spec.Partner,
			Sector: fmt.Sprintf("%s/%d", o.Spec.MinerID, o.Spec.SectorNumber), Proof: sealv1.RegisteredProof(o.Spec.SectorSize, o.Spec.ProofType),
			State: string(o.Status.State), Batch: o.Status.Batch, Reason: o.Status.FailReason, Age: age(now.Sub(o.CreationTimestamp.Time))}
		if r.State == "" {
			r.State = string(sealv1.OrderPending)
		}
		if o.Status.Batch != "" {
			r.BatchPhase = string(phase[o.Namespace+"/"+o.Status.Batch])
			if r.BatchPhase == "" {
				r.BatchPhase = "gone"
			}
		}
		if r.C1 = c1[fmt.Sprintf("%s/%s/%d", o.Namespace, o.Status.Batch, o.Spec.SectorNumber)]; r.C1 == "" && o.Spec.Seed != nil {
			r.C1 = "seeded"
		}
		switch {
		case o.Status.NotifiedTime != nil:
			r.Notified = "yes"
		case o.Status.NotifyAttempts > 0:
			r.Notified = fmt.Sprintf("refused %dx", o.Status.NotifyAttempts)
		default:
			r.Notified = "no"
		}
		switch {
		case o.Spec.Cleanup:
			r.Done = "cleanup"
		case o.Spec.Finalized:
			r.Done = "finalize"
		}
		rows = append(rows, r)
	}
	return rows
}

func (a *app) ordersCommand() *cobra.Command {
	var out outputFlags
	var allNamespaces bool
	var partner string
	cmd := &cobra.Command{
		Use:   "orders [--partner NAME] [-A]",
		Short: "Remote-seal orders: each sector a partner's Curio ordered, its state, batch and partner",
		Long: `One row per SealOrder: ORDER (<miner>-<sector>), PARTNER, SECTOR, PROOF, STATE (what the
partner's status call sees: pending, sdr, trees, complete, failed, gone), BATCH and its PHASE,
NOTIFIED (whether the partner accepted the complete notice, or how often it refused), DONE
(finalize or cleanup, as the partner said) and AGE; the reasons of failed orders follow the
table.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			c, ns, err := a.namespacedClient()
			if err != nil {
				return err
			}
			var opts []client.ListOption
			if !allNamespaces {
				opts = append(opts, client.InNamespace(ns))
			}
			if partner != "" {
				// Orders and the batches formed from them carry the partner's label.
				opts = append(opts, client.MatchingLabels{orders.LabelPartner: partner})
			}
			ctx := cmd.Context()
			list, err := listAll(ctx, c, func() *sealv1.SealOrderList { return &sealv1.SealOrderList{} },
				func(l *sealv1.SealOrderList) []sealv1.SealOrder { return l.Items }, opts...)
			if err != nil {
				return listError("SealOrders", err)
			}
			batches, err := listBatches(ctx, c, opts...)
			if err != nil {
				return err
			}
			rows := OrderRows(list, batches, a.env.Now())
			if out.format != "" {
				return out.print(a.env.Out, rows)
			}
			t := newTable(a.env.Out, out.noHeaders)
			t.header("NAMESPACE", "ORDER", "PARTNER", "SECTOR", "PROOF", "STATE", "BATCH", "PHASE", "C1", "NOTIFIED", "DONE", "AGE")
			for _, r := range rows {
				t.row(r.Namespace, r.Order, r.Partner, r.Sector, r.Proof, r.State, orDash(r.Batch), orDash(r.BatchPhase), orDash(r.C1), r.Notified, orDash(r.Done), r.Age)
			}
			if err := t.flush(); err != nil {
				return err
			}
			for _, r := range rows {
				if r.Reason != "" {
					fmt.Fprintf(a.env.Out, "%s/%s: %s\n", r.Namespace, r.Order, r.Reason)
				}
			}
			return nil
		},
	}
	out.add(cmd, "json", "yaml")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "orders of every namespace")
	cmd.Flags().StringVar(&partner, "partner", "", "only this partner's orders")
	return cmd
}
