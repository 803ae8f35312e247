package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/kube"
)

// pageSize bounds each list response: a fleet of any size is read in pages, never in one
// response the API server has to build whole.
const pageSize = 500

// Client-side rate limits: client-go's defaults (5/10) would throttle the few list pages and
// the per-second polls of wait.
const (
	clientQPS   = 50
	clientBurst = 100
)

// kubeClient returns the API client, built once from the kubectl flags (or Env.Client).
func (a *app) kubeClient() (client.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	if a.env.Client != nil {
		a.client = a.env.Client
		return a.client, nil
	}
	cfg, err := a.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w (point --kubeconfig or KUBECONFIG at one, or pick one with --context)", err)
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.UserAgent = "kubectl-sealfleet"
	c, err := client.New(cfg, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	a.client = c
	return c, nil
}

// namespace is -n, else the kubeconfig context's namespace, else "default".
func (a *app) namespace() (string, error) {
	if a.env.Client != nil {
		if a.flags.Namespace != nil && *a.flags.Namespace != "" {
			return *a.flags.Namespace, nil
		}
		if a.env.Namespace != "" {
			return a.env.Namespace, nil
		}
		return "default", nil
	}
	ns, _, err := a.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w (give one with -n)", err)
	}
	return ns, nil
}

// namespacedClient is the client and the namespace (-n, else the kubeconfig context's) a
// command works in.
func (a *app) namespacedClient() (client.Client, string, error) {
	c, err := a.kubeClient()
	if err != nil {
		return nil, "", err
	}
	ns, err := a.namespace()
	return c, ns, err
}

// batchNamed is the client, the namespace and the SealBatch NAME that a one-batch command acts on.
func (a *app) batchNamed(ctx context.Context, name string) (client.Client, string, *sealv1.SealBatch, error) {
	c, ns, err := a.namespacedClient()
	if err != nil {
		return nil, "", nil, err
	}
	b, err := getBatch(ctx, c, ns, name)
	return c, ns, b, err
}

// listAll reads every page of a list (Limit + Continue), allocating a fresh page for each so
// that no decoded item of an earlier page is overwritten.
func listAll[T any, L client.ObjectList](ctx context.Context, c client.Reader, newPage func() L, items func(L) []T, opts ...client.ListOption) ([]T, error) {
	var all []T
	cont := ""
	for {
		page := newPage()
		pageOpts := append(slices.Clone(opts), client.Limit(pageSize), client.Continue(cont))
		if err := c.List(ctx, page, pageOpts...); err != nil {
			return nil, err
		}
		all = append(all, items(page)...)
		if cont = page.GetContinue(); cont == "" {
			return all, nil
		}
	}
}

func listBatches(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]sealv1.SealBatch, error) {
	items, err := listAll(ctx, c, func() *sealv1.SealBatchList { return &sealv1.SealBatchList{} },
		func(l *sealv1.SealBatchList) []sealv1.SealBatch { return l.Items }, opts...)
	return items, listError("SealBatches", err)
}

func listNodes(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]sealv1.SealerNode, error) {
	items, err := listAll(ctx, c, func() *sealv1.SealerNodeList { return &sealv1.SealerNodeList{} },
		func(l *sealv1.SealerNodeList) []sealv1.SealerNode { return l.Items }, opts...)
	return items, listError("SealerNodes", err)
}

func listPods(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]corev1.Pod, error) {
	items, err := listAll(ctx, c, func() *corev1.PodList { return &corev1.PodList{} },
		func(l *corev1.PodList) []corev1.Pod { return l.Items }, opts...)
	return items, listError("pods", err)
}

func listEvents(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]corev1.Event, error) {
	items, err := listAll(ctx, c, func() *corev1.EventList { return &corev1.EventList{} },
		func(l *corev1.EventList) []corev1.Event { return l.Items }, opts...)
	return items, listError("events", err)
}

// listError names what could not be listed, and the likely fix for a missing CRD.
func listError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return fmt.Errorf("listing %s: %w (are the sealfleet CRDs installed? install the sealfleet Helm chart)", what, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("listing %s: %w (your kubeconfig user needs list on them)", what, err)
	}
	return fmt.Errorf("listing %s: %w%s", what, err, unreachableHint(err))
}

// unreachableHint is the fix for an API server that did not answer at all.
func unreachableHint(err error) string {
	var netErr net.Error
	if errors.As(err, &netErr) {
		return " (is the cluster reachable? kubectl cluster-info checks the kubeconfig's server; --context picks another)"
	}
	return ""
}

// getBatch reads one SealBatch, with a not-found error that says how to find the right name.
func getBatch(ctx context.Context, c client.Reader, ns, name string) (*sealv1.SealBatch, error) {
	b := &sealv1.SealBatch{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("SealBatch %s/%s not found: kubectl get sealbatches -A lists them (-n picks the namespace)", ns, name)
		}
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("reading SealBatch %s/%s: %w (are the sealfleet CRDs installed? install the sealfleet Helm chart)", ns, name, err)
		}
		return nil, fmt.Errorf("reading SealBatch %s/%s: %w%s", ns, name, err, unreachableHint(err))
	}
	return b, nil
}

// phaseOf is the batch's phase; a batch the operator has not looked at yet is Pending.
func phaseOf(b *sealv1.SealBatch) sealv1.SealBatchPhase {
	if b.Status.Phase == "" {
		return sealv1.PhasePending
	}
	return b.Status.Phase
}

// allPhases lists the phases in lifecycle order.
var allPhases = sealv1.Phases
