package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sealfleet/sealfleet/internal/scratch"
)

// newScrub is what the operator's scrub pod runs when a batch releases its slot: it discards
// the slot's byte range on every layer device so the next batch starts clean.
func newScrub() *cobra.Command {
	var offset, length int64
	var roots []string
	cmd := &cobra.Command{
		Use:   "scrub --offset BYTES --length BYTES --root DIR... DEVICE...",
		Short: "discard a released slot's range on layer devices (BLKDISCARD or hole punching)",
		Long: `Discards [offset, offset+length) of each layer device. A device under /dev/ must be a
block device; any other path must be a regular file that stays, symlinks resolved, under the
--root it lies under (the SealerNode's spec.hostPathRoots): this re-check on the node is what a
CRD rule cannot do.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			if offset < 0 || length <= 0 {
				return fmt.Errorf("--offset must be ≥ 0 and --length > 0 (got %d, %d)", offset, length)
			}
			for _, p := range paths {
				if err := scratch.DiscardConfined(p, roots, offset, length); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "scrubbed %s [%d, %d)\n", p, offset, offset+length)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&offset, "offset", 0, "start of the slot on each device, in bytes")
	cmd.Flags().Int64Var(&length, "length", 0, "length of the slot on each device, in bytes")
	cmd.Flags().StringArrayVar(&roots, "root", nil, "a host path root layer files must stay under (repeat for each)")
	return cmd
}
