// Package plugin is `kubectl sealfleet`: read-mostly views of the fleet (status, batch,
// slots), waiting on batches, writing seeds, checking CommR against rust-fil-proofs and
// Prometheus file_sd targets. Each command is a thin cobra wrapper around a pure function
// (objects in, rows or a summary out), so the logic is tested without a cluster.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Exit codes, the same for every command.
const (
	ExitOK = 0
	// ExitNotWanted: the thing checked is not as wanted (a failed batch, a CommR mismatch).
	ExitNotWanted = 1
	// ExitTimeout: a wait ran out of time.
	ExitTimeout = 2
	// ExitError: bad usage, or the API could not be reached or refused a request.
	ExitError = 3
)

// exitError carries an exit code other than ExitError up to Execute.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func notWanted(format string, a ...any) error {
	return &exitError{code: ExitNotWanted, msg: fmt.Sprintf(format, a...)}
}

func timedOut(format string, a ...any) error {
	return &exitError{code: ExitTimeout, msg: fmt.Sprintf(format, a...)}
}

// exitCode maps a command's error to the process exit code.
func exitCode(err error) int {
	var e *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &e):
		return e.code
	}
	return ExitError
}

// Env is what the commands read and write besides their flags; tests replace parts of it.
type Env struct {
	In       io.Reader
	Out, Err io.Writer
	Now      func() time.Time
	// Client, when set, is used instead of one built from the kubeconfig (tests), and
	// Namespace is then the default namespace.
	Client    client.Client
	Namespace string
	// PollInterval is how often wait reads the batches (1 s when zero).
	PollInterval time.Duration
}

// Execute runs the plugin with the process's arguments and streams and returns the exit code.
func Execute(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := NewRootCommand(Env{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	code := exitCode(err)
	switch {
	case code == ExitError:
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

// app is the state shared by the commands: the kubectl flags and the client built from them.
type app struct {
	env    Env
	flags  *genericclioptions.ConfigFlags
	client client.Client
}

// NewRootCommand builds `kubectl sealfleet` with all its subcommands.
func NewRootCommand(env Env) *cobra.Command {
	if env.In == nil {
		env.In = os.Stdin
	}
	if env.Out == nil {
		env.Out = os.Stdout
	}
	if env.Err == nil {
		env.Err = os.Stderr
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.PollInterval == 0 {
		env.PollInterval = time.Second
	}
	a := &app{env: env, flags: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-sealfleet",
		Short: "Look at and steer a sealfleet cluster: fleet status, batches, slots, seeds",
		Long: `kubectl sealfleet shows what the sealfleet operator is doing and helps drive it.

Who holds which layer slot is derived from the SealBatches' status (the only record), as
the operator derives it; SealerNode status.freeSlots is only the node agent's last scan.

Exit codes:
  0  ok
  1  the thing checked is not as wanted (a failed batch, a CommR that differs)
  2  a wait timed out
  3  bad usage, or an API error (unreachable cluster, object not found, forbidden)`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl sealfleet"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.Err)
	a.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		a.statusCommand(),
		a.batchCommand(),
		a.slotsCommand(),
		a.waitCommand(),
		a.seedsCommand(),
		a.verifyCommand(),
		a.qualifyCommand(),
		a.ordersCommand(),
		a.connectStringCommand(),
		a.scrapeTargetsCommand(),
	)
	return root
}
