package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"
)

// newRemoveOutputs is what the operator's output-cleanup pod runs when a remote-seal partner
// is done with a sector (cleanup): it deletes the sector's replica and cache directory.
func newRemoveOutputs() *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:   "remove-outputs --root DIR PATH...",
		Short: "delete sector outputs (a replica, a cache directory) beneath an output root",
		Long: `Deletes each PATH (relative to --root, the mounted output root) and all it holds. The
paths are opened beneath the root: neither ".." nor a symlink leads out of it. A path already
gone is not an error, so a cleanup that ran once can run again.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			r, err := os.OpenRoot(root)
			if err != nil {
				return fmt.Errorf("--root %s: %w", root, err)
			}
			defer r.Close()
			for _, p := range paths {
				if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
					return fmt.Errorf("%q must be a clean path relative to --root", p)
				}
				if err := r.RemoveAll(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("removing %s: %w", p, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", p)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&root, "root", "/output", "the output root the paths are relative to")
	return cmd
}
