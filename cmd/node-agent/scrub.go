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
	cmd := &cobra.Command{
		Use:   "scrub --offset BYTES --length BYTES DEVICE...",
		Short: "discard a released slot's range on layer devices (BLKDISCARD or hole punching)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			if offset < 0 || length <= 0 {
				return fmt.Errorf("--offset must be ≥ 0 and --length > 0 (got %d, %d)", offset, length)
			}
			for _, p := range paths {
				if err := scratch.Discard(p, offset, length); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "scrubbed %s [%d, %d)\n", p, offset, offset+length)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&offset, "offset", 0, "start of the slot on each device, in bytes")
	cmd.Flags().Int64Var(&length, "length", 0, "length of the slot on each device, in bytes")
	return cmd
}
