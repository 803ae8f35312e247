// Command node-agent runs on every opted-in node: it discovers the machine, prepares it as
// the SealerNode spec asks, publishes SealerNode status and serves /metrics. `discover` and
// `calc` print the inventory and the sealer core layout for a machine root.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	"sigs.k8s.io/yaml"

	"github.com/sealfleet/sealfleet/internal/cpuset"
	"github.com/sealfleet/sealfleet/internal/kube"
	"github.com/sealfleet/sealfleet/internal/layout"
	"github.com/sealfleet/sealfleet/internal/nodeagent"
	"github.com/sealfleet/sealfleet/internal/topology"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		if errors.Is(err, errUnsupported) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "node-agent",
		Short:         "sealfleet node agent: topology discovery, node preparation, SealerNode status, hasher metrics",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(newRun(), newDiscover(), newCalc(), newScrub(), newClaimOutput(), newRemoveOutputs())
	return root
}

// print writes v as JSON or YAML.
func printAs(w io.Writer, v any, format string) error {
	switch format {
	case "json", "":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("--output %q: want json or yaml", format)
}

func newDiscover() *cobra.Command {
	var root, output string
	c := &cobra.Command{
		Use:   "discover",
		Short: "Print the topology discovered under --root (sys/ and proc/)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := topology.Discover(root)
			if err != nil {
				return err
			}
			return printAs(cmd.OutOrStdout(), t, output)
		},
	}
	c.Flags().StringVar(&root, "root", "/", "filesystem root holding sys/ and proc/")
	c.Flags().StringVarP(&output, "output", "o", "json", "json or yaml")
	return c
}

func newCalc() *cobra.Command {
	var root, output, reserved string
	var batch, hpc, maxPer int
	c := &cobra.Command{
		Use:   "calc",
		Short: "Print the sealer core layout for --batch-size on the machine under --root, or why it cannot run",
		Long: "Prints {\"batch_size\",\"supported\",\"reason\",\"coordinators\":[{\"cpu\",\"hashers\":[{\"cpu\",\"sectors\"}]}],\"roles\":{...}}.\n" +
			"CPU numbers are logical CPU ids as Linux numbers them. Exit status 2 when the batch size is unsupported.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := topology.Discover(root)
			if err != nil {
				return err
			}
			res, err := cpuset.Parse(reserved)
			if err != nil {
				return fmt.Errorf("--reserved-cpus: %w", err)
			}
			l, cerr := layout.Calculate(t.Layout(), batch, layout.Options{HashersPerCore: hpc, ReservedCPUs: res, MaxHashersPerCoordinator: maxPer})
			if err := printAs(cmd.OutOrStdout(), l, output); err != nil {
				return err
			}
			if cerr != nil {
				return errUnsupported
			}
			return nil
		},
	}
	c.Flags().StringVar(&root, "root", "/", "filesystem root holding sys/ and proc/")
	c.Flags().StringVarP(&output, "output", "o", "json", "json or yaml")
	c.Flags().IntVarP(&batch, "batch-size", "b", 32, "sectors in the batch (1, 2, 4, ... 128)")
	c.Flags().IntVar(&hpc, "hashers-per-core", 0, "hasher threads per physical core (0 = detect)")
	c.Flags().StringVar(&reserved, "reserved-cpus", "", "cpulist the sealer must not use")
	c.Flags().IntVar(&maxPer, "max-hashers-per-coordinator", 0, "lower the per-coordinator cap (0 = sealer default 14)")
	return c
}

// errUnsupported makes calc exit 2 after printing the reason.
var errUnsupported = errors.New("batch size not supported on this machine")

func newRun() *cobra.Command {
	a := &nodeagent.Agent{}
	var metricsAddr string
	var sd sectorDataFlags
	metricsSecure := true
	zapOpts := zap.Options{}
	c := &cobra.Command{
		Use:   "run",
		Short: "Scan, prepare and publish this node's SealerNode until stopped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logf.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			if a.NodeName == "" {
				a.NodeName = os.Getenv("NODE_NAME")
			}
			if a.NodeName == "" {
				return errors.New("--node-name (or NODE_NAME from the downward API) is required")
			}
			cfg, err := ctrlconfig.GetConfig()
			if err != nil {
				return err
			}
			cl, err := client.New(cfg, client.Options{Scheme: kube.Scheme()})
			if err != nil {
				return err
			}
			a.Client = cl
			a.Metrics = nodeagent.NewMetrics(a.NodeName)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx = logf.IntoContext(ctx, logf.Log.WithName("node-agent").WithValues("node", a.NodeName))
			if metricsAddr != "0" {
				srv, _, err := metricsServer(ctx, cfg, a.Metrics, metricsAddr, metricsSecure)
				if err != nil {
					return err
				}
				defer srv.Close()
			}
			if sd.addr != "" {
				if a.SectorDataURL, err = sd.publicURL(); err != nil {
					return err
				}
				srv, err := serveSectorData(ctx, sd, a.Metrics)
				if err != nil {
					return err
				}
				defer srv.Close()
			}
			return a.Run(ctx)
		},
	}
	c.Flags().StringVar(&a.NodeName, "node-name", "", "this node's name (default $NODE_NAME)")
	c.Flags().StringVar(&a.Root, "root", "/", "host filesystem root holding sys/ and proc/ (mount the host's /sys and /proc there)")
	c.Flags().DurationVar(&a.Interval, "interval", time.Minute, "time between scans")
	c.Flags().DurationVar(&a.Heartbeat, "heartbeat", 10*time.Minute, "write status at least this often even without change")
	c.Flags().DurationVar(&a.MetricsInterval, "metrics-interval", 15*time.Second, "time between /proc/stat samples")
	c.Flags().BoolVar(&a.DryRun, "dry-run", false, "never change the machine; report planned changes only")
	c.Flags().StringVar(&a.SealerCapabilities, "sealer-capabilities", "", "file the sealer image's `sealer capabilities --out` wrote on this node (the chart's init container): its PC2 engines go into status.capabilities")
	c.Flags().StringVar(&metricsAddr, "metrics-bind-address", ":8090", "address of /metrics and /healthz (0 disables)")
	c.Flags().BoolVar(&metricsSecure, "metrics-secure", true, "serve over HTTPS (self-signed) and answer /metrics only to callers whose token may GET /metrics (TokenReview + SubjectAccessReview); /healthz stays open")
	c.Flags().StringVar(&sd.addr, "sector-data-bind-address", "", "serve sealed sector data to remote-seal partners here, e.g. :9470 (empty: not served)")
	c.Flags().StringVar(&sd.url, "sector-data-url", "", "the URL partners reach that server at, published in status.sectorDataURL (default http(s)://$HOST_IP:<port>)")
	c.Flags().StringVar(&sd.keyFile, "sector-data-key-file", "", "file holding the key the operator signs sector data URLs with (the chart mounts its Secret)")
	c.Flags().StringVar(&sd.root, "sector-data-root", "/host/var/lib/sealfleet/output", "the output root (as mounted here) signed paths are relative to: the host path remote-seal batches write to")
	c.Flags().StringVar(&sd.certFile, "sector-data-tls-cert", "", "serve HTTPS with this certificate (PEM; with --sector-data-tls-key), which must name the node's sector data address")
	c.Flags().StringVar(&sd.keyPEM, "sector-data-tls-key", "", "the certificate's private key (PEM)")
	c.Flags().StringVar(&sd.caDir, "sector-data-tls-ca-dir", "", "serve HTTPS with a certificate issued at start for the node's sector data address, signed by the CA in this directory (tls.crt, tls.key: the chart's sector-data CA, which partners trust)")
	c.Flags().BoolVar(&sd.insecure, "sector-data-insecure-http", false, "serve plain HTTP (the signed URL is the only credential, and it travels in clear): only on a network the partners and this node trust")
	// The operator's logging flags (--zap-log-level, --zap-devel, --zap-encoder, …).
	logFlags := flag.NewFlagSet("log", flag.ContinueOnError)
	zapOpts.BindFlags(logFlags)
	c.Flags().AddGoFlagSet(logFlags)
	return c
}

// metricsServer serves /metrics and /healthz on addr and returns the address it listens on.
// Secure: HTTPS with a self-signed certificate, and /metrics behind controller-runtime's
// authentication and authorization filter (the operator's metrics are served the same way);
// /healthz stays open for probes.
func metricsServer(ctx context.Context, cfg *rest.Config, m *nodeagent.Metrics, addr string, secure bool) (*http.Server, string, error) {
	log := logf.FromContext(ctx)
	metrics := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second} // serves the listener opened below
	if secure {
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, "", err
		}
		filter, err := filters.WithAuthenticationAndAuthorization(cfg, hc)
		if err != nil {
			return nil, "", err
		}
		if metrics, err = filter(log, metrics); err != nil {
			return nil, "", err
		}
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("sealfleet-node-agent", nil, nil)
		if err != nil {
			return nil, "", err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, "", err
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv.Handler = mux
	l, err := net.Listen("tcp", addr) // a taken port fails the agent now, not silently later
	if err != nil {
		return nil, "", fmt.Errorf("--metrics-bind-address %s: %w", addr, err)
	}
	go func() {
		var err error
		if secure {
			err = srv.ServeTLS(l, "", "")
		} else {
			err = srv.Serve(l)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "metrics server")
		}
	}()
	return srv, l.Addr().String(), nil
}
