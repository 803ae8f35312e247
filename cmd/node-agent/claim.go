package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sealfleet/sealfleet/internal/outputclaim"
	"github.com/sealfleet/sealfleet/internal/render"
)

// newClaimOutput is the init container of every sealer pod: it claims the batch's output
// directory before the sealer writes there.
func newClaimOutput() *cobra.Command {
	var dir, batch, uid string
	cmd := &cobra.Command{
		Use:   "claim-output --dir DIR --batch NAMESPACE/NAME --uid UID",
		Short: "claim a batch's output directory, refusing one another batch owns",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := outputclaim.Claim(dir, outputclaim.Owner{Batch: batch, UID: uid})
			var owned *outputclaim.OwnedError
			if errors.As(err, &owned) {
				fmt.Fprintln(cmd.ErrOrStderr(), err)
				// The kubelet keeps this as the container's termination message.
				_ = os.WriteFile("/dev/termination-log", []byte(err.Error()), 0o644)
				os.Exit(render.ExitOutputOwned) // the operator fails the batch: a retry meets the same owner
			}
			if err == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s claimed for %s (uid %s)\n", dir, batch, uid)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the batch's output directory")
	cmd.Flags().StringVar(&batch, "batch", "", "the batch, as namespace/name")
	cmd.Flags().StringVar(&uid, "uid", "", "the batch's UID")
	for _, f := range []string{"dir", "batch", "uid"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}
