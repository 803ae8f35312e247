// Package controllers holds the operator's reconcilers, one per concern: placement (the queue
// of pending batches → a node and slot), the sealer (config + pod lifecycle, progress,
// results) and release (slot and scratch back, finalizer). What a batch holds is recorded in
// its own status alone (internal/ledger).
package controllers

import (
	"context"
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sealfleet/sealfleet/internal/render"
)

// batchWorkers is how many batches the sealer and release reconcilers handle at once.
const batchWorkers = 4

// Options are the operator's settings (flags of cmd/manager).
type Options struct {
	// WatchNamespaces limits the operator to SealBatches (and the pods, ConfigMaps and
	// budgets it makes for them) in these namespaces, comma separated; empty: every namespace.
	WatchNamespaces string
	SealerImage     string
	ScrubImage      string
	ImagePullPolicy string
	// ImagePullSecrets names, comma separated, the pull secrets of sealer and scrub pods.
	ImagePullSecrets  string
	SealerHostNetwork bool
	SealerMetricsPort int
	SealerMetricsAddr string
	MemoryBase        string
	// SealerPriorityClass names the PriorityClass of sealer pods ("" = cluster default).
	SealerPriorityClass string
	// SealerRuntimeClass names the RuntimeClass of sealer and C1 pods ("" = the default runtime).
	SealerRuntimeClass string
	MemoryPerSector    string
	ProgressInterval   time.Duration
	ReleaseTimeout     time.Duration
	// ParentCacheNamespace holds the pods that build nodes' parent caches; empty: no node
	// caches (each sealer pod builds its own, as a standalone sealer does).
	ParentCacheNamespace string
	// ScrubNamespace holds the pods that scrub released slots and qualify nodes (the
	// operator's, not a tenant's).
	ScrubNamespace string
	// QualifySeconds is how long each measurement of a node qualification runs.
	QualifySeconds float64
	// SealerNamespace holds every batch's sealer and C1 pods, their ConfigMaps and disruption
	// budgets; "" puts them in each batch's own namespace (and needs pod rights in every
	// namespace served).
	SealerNamespace string
	// PodsRoleName names, in the refusal at start, the Role that should grant the operator
	// its pod rights in each node-pod namespace (the chart's); "" describes it instead.
	PodsRoleName string
	// RemoteSeal runs the remote-seal provider (off unless RemoteSeal.Listen is set).
	RemoteSeal RemoteSealOptions

	// Progress reads a running sealer's progress; nil uses HTTP to the pod's /progress.
	Progress ProgressSource
	// Results reads a finished sealer's results when its termination message cannot hold
	// them; nil uses the pod's log.
	Results ResultsSource
}

// BindFlags registers the options as flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.WatchNamespaces, "watch-namespaces", "", "serve SealBatches only in these namespaces, comma separated (empty: every namespace); the operator then needs rights only there")
	fs.StringVar(&o.SealerImage, "sealer-image", "localhost/sealfleet-sealer:dev", "image of the native sealer")
	fs.StringVar(&o.ScrubImage, "scrub-image", "localhost/sealfleet-operator:dev", "image with /node-agent: scrub pods, and the init container of sealer pods that claims the batch's output directory")
	fs.StringVar(&o.ImagePullSecrets, "image-pull-secrets", "", "image pull secrets of sealer and scrub pods, comma separated; each must exist where those pods run (the sealer and scrub namespaces)")
	fs.StringVar(&o.ImagePullPolicy, "image-pull-policy", "IfNotPresent", "pull policy of sealer and scrub pods")
	fs.BoolVar(&o.SealerHostNetwork, "sealer-host-network", false, "run sealer pods on the host network (nodes without pod networking)")
	fs.IntVar(&o.SealerMetricsPort, "sealer-metrics-port", 9464, "port of the sealer's /metrics and /progress; with host networking, slot i uses port+i")
	fs.StringVar(&o.SealerMetricsAddr, "sealer-metrics-address", "", "address the sealer's metrics port listens on (empty: all addresses of the pod; use the node's scrape address, e.g. 127.0.0.1, with host networking)")
	fs.StringVar(&o.SealerRuntimeClass, "sealer-runtime-class", "", "RuntimeClass of sealer and C1 pods (empty: containerd's default runtime); name the NVIDIA container runtime's class where it is not the default, or GPU batches see no driver")
	fs.StringVar(&o.SealerPriorityClass, "sealer-priority-class", "", "PriorityClass of sealer pods (empty: the cluster default); give one above your preemptible workloads so a preemption does not kill a multi-hour PC1")
	fs.StringVar(&o.MemoryBase, "sealer-memory-base", "2Gi", "memory (besides hugepages) every sealer pod starts from; at most 1Gi for 2KiB and 8MiB sectors")
	fs.StringVar(&o.MemoryPerSector, "sealer-memory-per-sector", "256Mi", "memory added per sector of the batch")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", 10*time.Second, "how often a running sealer's progress is read")
	fs.StringVar(&o.ParentCacheNamespace, "parent-cache-namespace", "sealfleet-batches", "namespace of the pods that build each node's parent caches (it must be served: see --watch-namespaces); empty: every sealer pod builds its own cache")
	fs.StringVar(&o.SealerNamespace, "sealer-namespace", "", "namespace of every batch's sealer and C1 pods, ConfigMaps and disruption budgets (the operator's: tenants with pods/exec in their own namespaces never reach a privileged sealer; it must be served, see --watch-namespaces, and allow privileged hostPath pods); empty: each batch's own namespace")
	fs.StringVar(&o.PodsRoleName, "pods-role", "", "name of the Role that grants this operator its pod, ConfigMap and disruption-budget rights in each node-pod namespace (the chart sets it): named in the refusal at start when a namespace lacks them")
	fs.StringVar(&o.ScrubNamespace, "scrub-namespace", "sealfleet-batches", "namespace of the pods that scrub released slots (it must be served: see --watch-namespaces, and allow privileged hostPath pods); keep tenants out of it")
	o.RemoteSeal.bindFlags(fs)
	fs.Float64Var(&o.QualifySeconds, "qualify-seconds", 2, "seconds each measurement of a node qualification runs (random reads, sequential read and write per layer device, hashing, memory)")
	fs.DurationVar(&o.ReleaseTimeout, "release-timeout", 10*time.Minute, "after this long a release waiting for its sealer pod to end is reported stuck")
}

func (o *Options) defaults() {
	if o.SealerImage == "" {
		o.SealerImage = "localhost/sealfleet-sealer:dev"
	}
	if o.ScrubImage == "" {
		o.ScrubImage = "localhost/sealfleet-operator:dev"
	}
	if o.ImagePullPolicy == "" {
		o.ImagePullPolicy = string(corev1.PullIfNotPresent)
	}
	if o.SealerMetricsPort == 0 {
		o.SealerMetricsPort = 9464
	}
	if o.MemoryBase == "" {
		o.MemoryBase = "2Gi"
	}
	if o.MemoryPerSector == "" {
		o.MemoryPerSector = "256Mi"
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = 10 * time.Second
	}
	if o.ScrubNamespace == "" {
		o.ScrubNamespace = "sealfleet-batches"
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = 10 * time.Minute
	}
}

func (o *Options) podOptions() (render.PodOptions, error) {
	if o.SealerMetricsAddr != "" && net.ParseIP(o.SealerMetricsAddr) == nil {
		return render.PodOptions{}, fmt.Errorf("--sealer-metrics-address %q is not an IP address", o.SealerMetricsAddr)
	}
	base, err := resource.ParseQuantity(o.MemoryBase)
	if err != nil {
		return render.PodOptions{}, err
	}
	per, err := resource.ParseQuantity(o.MemoryPerSector)
	if err != nil {
		return render.PodOptions{}, err
	}
	return render.PodOptions{
		Image: o.SealerImage, ImagePullPolicy: corev1.PullPolicy(o.ImagePullPolicy),
		HostNetwork: o.SealerHostNetwork, MemoryBase: base, MemoryPerSector: per,
		MetricsPort: o.SealerMetricsPort, MetricsAddress: o.SealerMetricsAddr,
		PriorityClassName: o.SealerPriorityClass, RuntimeClassName: o.SealerRuntimeClass, PullSecrets: o.pullSecrets(), HelperImage: o.ScrubImage,
		Home: render.Home{Namespace: o.SealerNamespace},
	}, nil
}

// checkNodePodNamespaces refuses a namespace for the operator's node pods (parent-cache
// builders, scrubs) that the operator does not serve: its cache would never show those pods,
// and no cache would be built, no slot scrubbed.
func (o *Options) checkNodePodNamespaces() error {
	nss := commaList(o.WatchNamespaces)
	if len(nss) == 0 {
		return nil
	}
	for _, f := range []struct{ flag, ns, chart string }{
		{"--parent-cache-namespace", o.ParentCacheNamespace, "operator.parentCacheNamespace"},
		{"--scrub-namespace", o.ScrubNamespace, "operator.scrubNamespace"},
		{"--sealer-namespace", o.SealerNamespace, "operator.sealerNamespace"},
	} {
		if f.ns != "" && !slices.Contains(nss, f.ns) {
			return fmt.Errorf("%s %q is not one of --watch-namespaces %v: add it there (chart: operator.watchNamespaces) or pick one of those (chart: %s)", f.flag, f.ns, nss, f.chart)
		}
	}
	return nil
}

// pullSecrets parses --image-pull-secrets.
func (o *Options) pullSecrets() []string { return commaList(o.ImagePullSecrets) }

// CacheOptions confines the manager's cache of SealBatches to --watch-namespaces, and of pods,
// ConfigMaps and disruption budgets to the namespaces the operator keeps them in (the only
// ones it has rights on them in); SealerNodes and Nodes are cluster-scoped and always seen.
func (o *Options) CacheOptions() cache.Options {
	o.defaults()
	var opts cache.Options
	if nss := commaList(o.WatchNamespaces); len(nss) > 0 {
		opts.DefaultNamespaces = namespaceConfigs(nss)
	}
	if nss := o.podNamespaces(); nss != nil {
		only := cache.ByObject{Namespaces: namespaceConfigs(nss)}
		opts.ByObject = map[client.Object]cache.ByObject{&corev1.Pod{}: only, &corev1.ConfigMap{}: only, &policyv1.PodDisruptionBudget{}: only}
	}
	if o.RemoteSeal.Listen != "" {
		// Partner Secrets: the operator may read Secrets in the partner namespace only.
		if opts.ByObject == nil {
			opts.ByObject = map[client.Object]cache.ByObject{}
		}
		opts.ByObject[&corev1.Secret{}] = cache.ByObject{Namespaces: namespaceConfigs([]string{o.RemoteSeal.PartnerNamespace})}
	}
	return opts
}

func namespaceConfigs(nss []string) map[string]cache.Config {
	m := make(map[string]cache.Config, len(nss))
	for _, ns := range nss {
		m[ns] = cache.Config{}
	}
	return m
}

// commaList splits a comma-separated flag, dropping blanks.
func commaList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// The metrics endpoint authenticates and authorizes its callers through the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Setup registers every reconciler and index with the manager.
func Setup(mgr ctrl.Manager, o Options) error {
	o.defaults()
	po, err := o.podOptions()
	if err != nil {
		return err
	}
	if err := setupIndexes(mgr); err != nil {
		return err
	}
	if o.Progress == nil {
		o.Progress = httpProgress{}
	}
	if o.Results == nil {
		rs, err := newLogResults(mgr.GetConfig())
		if err != nil {
			return err
		}
		o.Results = rs
	}
	rec := func(name string) Recorder { return mgr.GetEventRecorder(name) }
	if err := o.checkNodePodNamespaces(); err != nil {
		return err
	}
	if err := o.RemoteSeal.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := o.checkPodRights(ctx, mgr.GetClient()); err != nil {
		return err
	}
	pods := podReads{cached: mgr.GetClient(), direct: mgr.GetAPIReader(), namespaces: o.podNamespaces()}
	var caches *ParentCaches
	if o.ParentCacheNamespace != "" {
		caches = &ParentCaches{Client: mgr.GetClient(), Namespace: o.ParentCacheNamespace, Pod: po}
	}
	qualify := &Qualifier{Client: mgr.GetClient(), Recorder: rec("sealfleet-qualify"), Namespace: o.ScrubNamespace, Pod: po,
		Seconds: o.QualifySeconds, HostNetwork: o.SealerHostNetwork}
	if lr, ok := o.Results.(*logResults); ok {
		qualify.Logs = lr.lines("qualify", render.QualificationLinePrefix)
	}
	if err := (&PlacementReconciler{Client: mgr.GetClient(), Recorder: rec("sealfleet-placement"), Caches: caches, Qualify: qualify,
		Handoff: o.RemoteSeal.handoffCheck(mgr.GetClient())}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&SealerReconciler{Client: mgr.GetClient(), Recorder: rec("sealfleet-sealer"), Pod: po,
		Progress: o.Progress, Results: o.Results, ProgressInterval: o.ProgressInterval, Caches: caches, Pods: pods}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ReleaseReconciler{Client: mgr.GetClient(), Recorder: rec("sealfleet-release"), Timeout: o.ReleaseTimeout, Home: po.Home, Pods: pods}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&ScrubReconciler{Client: mgr.GetClient(), Recorder: rec("sealfleet-scrub"), Namespace: o.ScrubNamespace,
		Image: o.ScrubImage, PullPolicy: corev1.PullPolicy(o.ImagePullPolicy), PullSecrets: o.pullSecrets(), HostNetwork: o.SealerHostNetwork}).SetupWithManager(mgr); err != nil {
		return err
	}
	if o.RemoteSeal.Listen != "" {
		return setupRemoteSeal(mgr, o, rec("sealfleet-remote-seal"))
	}
	return nil
}
