// Command manager is the sealfleet operator: it places SealBatches on SealerNodes, runs their
// sealer pods and releases their NVMe slots.
package main

import (
	"flag"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/sealfleet/sealfleet/controllers"
	"github.com/sealfleet/sealfleet/internal/kube"
)

func main() {
	var (
		metricsAddr, probeAddr string
		leaderElect            bool
		metricsSecure          bool
		opts                   controllers.Options
		apiQPS, apiBurst       int
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS (self-signed) to callers that authenticate with a token allowed to GET /metrics (TokenReview + SubjectAccessReview); false: plain HTTP for a loopback-only address")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect a leader so that only one replica acts")
	flag.IntVar(&apiQPS, "kube-api-qps", -1, "client-side limit of queries per second to the API server per resource type (negative: none, the API server's priority and fairness applies)")
	flag.IntVar(&apiBurst, "kube-api-burst", 200, "burst of queries to the API server (with a positive --kube-api-qps)")
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	cfg := ctrl.GetConfigOrDie()
	// A client-side bucket (one per resource type) made every SealBatch write of a fleet burst
	// (placements, reasons, finalizers, progress) queue behind the others: 2,000 writes at
	// 100 QPS is 20 s of time-to-place. The API server's priority and fairness protects it.
	cfg.QPS, cfg.Burst = float32(apiQPS), apiBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 kube.Scheme(),
		Metrics:                metricsOptions(metricsAddr, metricsSecure),
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "sealfleet-operator.sealfleet.io",
		Cache:                  opts.CacheOptions(),
	})
	if err != nil {
		log.Error(err, "creating manager")
		os.Exit(1)
	}
	if err := controllers.Setup(mgr, opts); err != nil {
		log.Error(err, "setting up controllers")
		os.Exit(1)
	}
	_ = mgr.AddHealthzCheck("healthz", healthz.Ping)
	_ = mgr.AddReadyzCheck("readyz", healthz.Ping)
	log.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// metricsOptions serves the operator's metrics as kubebuilder scaffolds do: HTTPS, and only to
// authenticated callers authorized for the non-resource URL /metrics.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr, SecureServing: secure}
	if secure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
