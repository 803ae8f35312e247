package controllers

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
	"github.com/sealfleet/sealfleet/internal/remoteseal/sectordata"
	"github.com/sealfleet/sealfleet/internal/render"
)

// RemoteSealOptions run sealfleet as a remote-seal provider (Curio's delegated protocol v0):
// off unless Listen is set.
type RemoteSealOptions struct {
	// Listen is the provider's HTTPS address ("" = no provider).
	Listen string
	// TLSCert and TLSKey are the server's certificate files; Insecure serves plain HTTP
	// instead (a TLS-terminating proxy in front, or tests).
	TLSCert, TLSKey string
	Insecure        bool
	// PartnerNamespace holds the partner Secrets and the data signing key.
	PartnerNamespace string
	// OrderNamespace holds the SealOrders and the batches formed from them.
	OrderNamespace string
	// MinerPrefix is f0 (mainnet) or t0 (test networks).
	MinerPrefix string
	MaxBatch    int
	MaxWait     time.Duration
	// OutputPath is the host path the batches write to, which node agents serve.
	OutputPath string
	// DataKeySecret names the Secret (key "key") whose bytes sign sector data URLs; created
	// with a random key when missing; node agents mount it.
	DataKeySecret string
	URLTTL        time.Duration
	// CleanupAfter deletes a complete sector's outputs this long after it completed when its
	// partner never called cleanup (0: never).
	CleanupAfter time.Duration
	// PublicURL is the provider's address as lotus-miners reach it: set, batches may hand
	// their sectors to lotus (spec.handoff), whose commit1 and done calls come back here.
	PublicURL string
	// Commit1Wait is how long lotus' commit1 call waits for the C1 output before a 503 (0:
	// 50 s; lotus retries after its cool-down).
	Commit1Wait time.Duration
	// PartnerCommit1Wait is how long a partner's (Curio's) commit1 call is held for its
	// sector's C1 output before a 412 (0: 20 s; Curio's client gives up a call after 30 s, and
	// the redirect to the output must fit in what is left; negative: not held).
	PartnerCommit1Wait time.Duration
}

// handoffCheck says why a batch's spec.handoff cannot be honoured ("" when it can), for
// placement to hold the batch with that explanation instead of sealing sectors no miner
// would take.
func (o *RemoteSealOptions) handoffCheck(c client.Reader) func(context.Context, *sealv1.SealBatch) (string, error) {
	return func(ctx context.Context, b *sealv1.SealBatch) (string, error) {
		if b.Spec.Handoff == nil {
			return "", nil
		}
		if o.Listen == "" || o.PublicURL == "" {
			return provider.ErrNoHandoff.Error(), nil
		}
		return provider.HandoffProblem(ctx, c, b, o.PartnerNamespace, o.OrderNamespace, o.OutputPath)
	}
}

func (o *RemoteSealOptions) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "remote-seal-listen", "", "serve Curio's delegated remote-seal protocol (v0) here, e.g. :8443 (empty: off)")
	fs.StringVar(&o.TLSCert, "remote-seal-tls-cert", "", "certificate (PEM) of the remote-seal provider's HTTPS server")
	fs.StringVar(&o.TLSKey, "remote-seal-tls-key", "", "its private key (PEM)")
	fs.BoolVar(&o.Insecure, "remote-seal-insecure-http", false, "serve the provider over plain HTTP (behind a TLS-terminating proxy, or tests); tokens then travel in clear between the two")
	fs.StringVar(&o.PartnerNamespace, "remote-seal-partner-namespace", "", "namespace of the partner Secrets (label "+provider.LabelPartner+") and the sector data signing key")
	fs.StringVar(&o.OrderNamespace, "remote-seal-namespace", "sealfleet-batches", "namespace of the SealOrders and the SealBatches formed from them")
	fs.StringVar(&o.MinerPrefix, "remote-seal-miner-prefix", "f0", "ID-address prefix of partners' miners: f0 (mainnet) or t0 (test networks)")
	fs.IntVar(&o.MaxBatch, "remote-seal-max-batch", 32, "most orders one batch takes (1, 2, 4, … 128; a full batch is also no larger than a free node can place)")
	fs.DurationVar(&o.MaxWait, "remote-seal-max-wait", 10*time.Minute, "longest an order waits for its batch to fill, or for a busy fleet to free a node, before a smaller batch is formed")
	fs.StringVar(&o.OutputPath, "remote-seal-output", "/var/lib/sealfleet/output", "host path remote-seal batches write to (node agents serve it: --sector-data-root)")
	fs.StringVar(&o.DataKeySecret, "remote-seal-data-key-secret", "sealfleet-sector-data-key", "Secret (in the partner namespace, key \"key\") signing sector data URLs; created when missing")
	fs.DurationVar(&o.URLTTL, "remote-seal-url-ttl", 6*time.Hour, "how long a sector data URL stays valid")
	fs.StringVar(&o.PublicURL, "remote-seal-public-url", "", "base URL lotus-miners reach the provider at (e.g. https://sealfleet.example:8443): batches may then hand their sectors to lotus (spec.handoff); empty: no handoff")
	fs.DurationVar(&o.CleanupAfter, "remote-seal-cleanup-after", 72*time.Hour, "delete a complete sector's replica and cache this long after it completed when its partner never called cleanup (Curio's own default; 0: never)")
	fs.DurationVar(&o.PartnerCommit1Wait, "remote-seal-commit1-hold", 20*time.Second, "how long a partner's commit1 call is held for its sector's C1 output before a 412 (Curio's client gives up a call after 30 s; negative: not held)")
	fs.DurationVar(&o.Commit1Wait, "remote-seal-lotus-commit1-hold", 50*time.Second, "how long lotus' commit1 call is held for its sector's C1 output before a 503 (lotus retries)")
}

// check refuses settings the provider cannot honour.
func (o *RemoteSealOptions) check() error {
	if o.Listen == "" {
		return nil
	}
	var errs []string
	if o.Insecure == (o.TLSCert != "" || o.TLSKey != "") {
		errs = append(errs, "give --remote-seal-tls-cert and --remote-seal-tls-key, or --remote-seal-insecure-http, not both or neither")
	} else if !o.Insecure && (o.TLSCert == "" || o.TLSKey == "") {
		errs = append(errs, "--remote-seal-tls-cert and --remote-seal-tls-key go together")
	}
	if o.PartnerNamespace == "" {
		errs = append(errs, "--remote-seal-partner-namespace is required (where the partner Secrets are)")
	}
	if o.MinerPrefix != "f0" && o.MinerPrefix != "t0" {
		errs = append(errs, fmt.Sprintf("--remote-seal-miner-prefix %q must be f0 or t0", o.MinerPrefix))
	}
	if !sealv1.BatchSizeSupported(o.MaxBatch) {
		errs = append(errs, fmt.Sprintf("--remote-seal-max-batch %d must be 1, 2, 4, 8, 16, 32, 64 or 128", o.MaxBatch))
	}
	if o.PublicURL != "" {
		if u, err := url.Parse(o.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Sprintf("--remote-seal-public-url %q must be a base URL such as https://sealfleet.example:8443", o.PublicURL))
		}
	}
	if !strings.HasPrefix(o.OutputPath, "/") {
		errs = append(errs, fmt.Sprintf("--remote-seal-output %q must be an absolute host path", o.OutputPath))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// dataKey reads the sector data signing key, creating it once.
func (o *RemoteSealOptions) dataKey(ctx context.Context, c client.Client, r client.Reader) ([]byte, error) {
	key := client.ObjectKey{Namespace: o.PartnerNamespace, Name: o.DataKeySecret}
	var s corev1.Secret
	err := r.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Data: map[string][]byte{"key": b}}
		err = c.Create(ctx, &s)
		if apierrors.IsAlreadyExists(err) {
			err = r.Get(ctx, key, &s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sector data signing key %s: %w", key, err)
	}
	if len(s.Data["key"]) < 32 {
		return nil, fmt.Errorf("sector data signing key %s: data.key must hold at least 32 bytes", key)
	}
	return s.Data["key"], nil
}

// setupRemoteSeal registers the order controller and the provider's server; output-cleanup
// pods run like scrub pods (namespace, image, host network, pull secrets).
func setupRemoteSeal(mgr ctrl.Manager, all Options, rec Recorder) error {
	o := all.RemoteSeal
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key, err := o.dataKey(ctx, mgr.GetClient(), mgr.GetAPIReader())
	if err != nil {
		return err
	}
	output := sealv1.OutputSpec{HostPath: &sealv1.HostPathOutput{Path: o.OutputPath}}
	hc := &http.Client{Timeout: time.Minute}
	order := &OrderReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, PartnerNamespace: o.PartnerNamespace, OrderNamespace: o.OrderNamespace,
		Policy: orders.Policy{MaxBatch: o.MaxBatch, MaxWait: o.MaxWait}, Output: output, HTTP: hc,
		Cleanup:      render.OutputCleanupInput{Namespace: all.ScrubNamespace, OutputPath: o.OutputPath, HostNetwork: all.SealerHostNetwork, PullSecrets: all.pullSecrets()},
		CleanupImage: all.ScrubImage, CleanupPull: corev1.PullPolicy(all.ImagePullPolicy), CleanupAfter: o.CleanupAfter}
	logger := mgr.GetLogger().WithName("remote-seal")
	backend := &provider.Backend{Client: mgr.GetClient(), Namespace: o.PartnerNamespace, OrderNamespace: o.OrderNamespace, MinerPrefix: o.MinerPrefix,
		Data:    &provider.NodeLocator{Client: mgr.GetClient(), Signer: sectordata.Signer{Key: key}, TTL: o.URLTTL},
		Problem: func(err error) { logger.Error(err, "partner Secret ignored") }, Wait: max(cmp.Or(o.PartnerCommit1Wait, 20*time.Second), 0),
		Fresh: mgr.GetAPIReader()}
	srv := &v0.Server{Backend: backend, Error: func(route string, err error) { logger.Error(err, "remote-seal request failed", "route", route) },
		Observe: func(route string, code int, d time.Duration) {
			metricRemoteSealRequests.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
		}}
	var lotus *LotusHandoff
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	if o.PublicURL != "" {
		ep := &provider.LotusEndpoints{Client: mgr.GetClient(), Namespace: o.OrderNamespace, Signer: sectordata.Signer{Key: key},
			Data: &provider.NodeLocator{Client: mgr.GetClient(), Signer: sectordata.Signer{Key: key}, TTL: o.URLTTL}, Wait: cmp.Or(o.Commit1Wait, 50*time.Second),
			Fresh: mgr.GetAPIReader(),
			Event: func(b *sealv1.SealBatch, warning bool, reason, msg string) {
				kind := corev1.EventTypeNormal
				if warning {
					kind = corev1.EventTypeWarning
				}
				rec.Eventf(b, nil, kind, reason, "Handoff", "%s", msg)
			}}
		mux.Handle(provider.LotusRoutePrefix, observeLotus(ep.Handler()))
		// lotus fetches a received sector at once, and again after its own restart: its node
		// URLs last as long as the outputs may (cleanup timeout), its callbacks past the
		// longest seed wait (720h) and the commit.
		lotus = &LotusHandoff{PublicURL: o.PublicURL, Endpoints: ep, CallbackTTL: 60 * 24 * time.Hour,
			Data: &provider.NodeLocator{Client: mgr.GetClient(), Signer: sectordata.Signer{Key: key}, TTL: max(o.URLTTL, o.CleanupAfter)}}
		if err := (&HandoffReconciler{Client: mgr.GetClient(), Recorder: rec, PartnerNamespace: o.PartnerNamespace, OrderNamespace: o.OrderNamespace,
			OutputPath: o.OutputPath}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	order.Lotus = lotus
	counts := &orderCounts{reader: mgr.GetClient(), namespace: o.OrderNamespace}
	if err := metrics.Registry.Register(counts); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if !errors.As(err, &dup) {
			return err
		}
		// A later manager in one process (tests): its orders are the ones to count, not
		// those of a stopped manager's cache.
		metrics.Registry.Unregister(dup.ExistingCollector)
		if err := metrics.Registry.Register(counts); err != nil {
			return err
		}
	}
	if err := order.SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Add(&providerServer{opts: o, handler: mux})
}

// orderCounts exports the orders by partner and state at each scrape, from the cache.
type orderCounts struct {
	reader    client.Reader
	namespace string
}

var orderCountsDesc = prometheus.NewDesc("sealfleet_remote_seal_orders", "Remote-seal orders (SealOrders) by partner and protocol state.", []string{"partner", "state"}, nil)

func (c *orderCounts) Describe(ch chan<- *prometheus.Desc) { ch <- orderCountsDesc }

func (c *orderCounts) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list sealv1.SealOrderList
	if err := c.reader.List(ctx, &list, client.InNamespace(c.namespace)); err != nil {
		return
	}
	type key struct{ partner, state string }
	n := map[key]int{}
	for _, o := range list.Items {
		st := string(o.Status.State)
		if st == "" {
			st = string(sealv1.OrderPending)
		}
		n[key{o.Spec.Partner, st}]++
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(orderCountsDesc, prometheus.GaugeValue, float64(v), k.partner, k.state)
	}
}

// providerServer serves the protocol on every replica (its state is the API server's; slot
// reservations are per replica, as Curio keeps them per process).
type providerServer struct {
	opts    RemoteSealOptions
	handler http.Handler
}

func (p *providerServer) NeedLeaderElection() bool { return false }

func (p *providerServer) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", p.opts.Listen)
	if err != nil {
		return fmt.Errorf("remote-seal provider: %w", err)
	}
	srv := &http.Server{Handler: p.handler, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.FromContext(ctx).Info("remote-seal provider listening", "address", ln.Addr().String(), "protocol", v0.BasePath, "curio", v0.FollowedCommit)
	if p.opts.Insecure {
		err = srv.Serve(ln)
	} else {
		err = srv.ServeTLS(ln, p.opts.TLSCert, p.opts.TLSKey)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

var _ manager.LeaderElectionRunnable = (*providerServer)(nil)

// observeLotus records lotus' calls in sealfleet_remote_seal_request_seconds, as route
// lotus-commit1 or lotus-done.
func observeLotus(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		route := "lotus-other" // any path a caller invents counts here, not as a label of its own
		switch p := strings.TrimPrefix(r.URL.Path, provider.LotusRoutePrefix); p {
		case "commit1", "done":
			route = "lotus-" + p
		}
		metricRemoteSealRequests.WithLabelValues(route, strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
