package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator creates privileged pods. Where it may do so is the most sensitive thing its
// ServiceAccount holds, so it is granted only in the namespaces the operator puts pods in (its
// node-pod namespaces), the cache watches pods and ConfigMaps only there, and the operator
// refuses to start when a namespace it is configured for lacks the rights, rather than
// failing batch by batch.

// podRight is one verb on one (sub)resource the operator needs in a namespace.
type podRight struct {
	group, resource, subresource, verb string
}

func (r podRight) String() string {
	res := r.resource
	if r.subresource != "" {
		res += "/" + r.subresource
	}
	if r.group != "" {
		res = r.group + "/" + res
	}
	return r.verb + " " + res
}

// rights expands verbs on a resource.
func rights(group, resource, subresource string, verbs ...string) []podRight {
	out := make([]podRight, len(verbs))
	for i, v := range verbs {
		out[i] = podRight{group, resource, subresource, v}
	}
	return out
}

var (
	// nodePodRights: every node-pod namespace (sealer, scrub, parent-cache builders).
	nodePodRights = rights("", "pods", "", "create", "delete", "get", "list", "watch")
	// logRights: the sealer's results and the qualification figures come from pod logs.
	logRights = rights("", "pods", "log", "get")
	// partnerRights: the remote-seal provider reads partner Secrets and creates its signing key.
	partnerRights = rights("", "secrets", "", "create", "get", "list", "watch")
	// sealerHomeRights: the sealer namespace also holds each batch's config, seeds and budget.
	sealerHomeRights = slices.Concat(
		rights("", "configmaps", "", "create", "delete", "get", "list", "update", "watch"),
		rights("policy", "poddisruptionbudgets", "", "create", "delete", "get"),
	)
)

// namespaceRights is what the operator needs in one namespace ("" = every namespace) and the
// settings that put it there.
type namespaceRights struct {
	namespace string
	why       []string
	rights    []podRight
	// grant says what grants them, for the refusal ("" = the pods Role).
	grant string
}

// requiredPodRights says which rights the operator needs where, from its settings alone.
// With --sealer-namespace empty (the legacy mode) sealer pods live in each batch's own
// namespace: it then needs them in every namespace it serves.
func (o *Options) requiredPodRights() []namespaceRights {
	byNS := map[string]*namespaceRights{}
	var order []string
	add := func(ns, why string, rs ...[]podRight) {
		nr := byNS[ns]
		if nr == nil {
			nr = &namespaceRights{namespace: ns}
			byNS[ns] = nr
			order = append(order, ns)
		}
		nr.why = append(nr.why, why)
		for _, r := range slices.Concat(rs...) {
			if !slices.Contains(nr.rights, r) {
				nr.rights = append(nr.rights, r)
			}
		}
	}
	if o.SealerNamespace != "" {
		add(o.SealerNamespace, "--sealer-namespace", nodePodRights, logRights, sealerHomeRights)
	} else if served := commaList(o.WatchNamespaces); len(served) > 0 {
		for _, ns := range served {
			add(ns, "--sealer-namespace empty: sealer pods in each served batch namespace (--watch-namespaces)", nodePodRights, logRights, sealerHomeRights)
		}
	} else {
		add("", "--sealer-namespace empty: sealer pods in each batch's own namespace", nodePodRights, logRights, sealerHomeRights)
	}
	add(o.ScrubNamespace, "--scrub-namespace", nodePodRights, logRights)
	if o.ParentCacheNamespace != "" {
		add(o.ParentCacheNamespace, "--parent-cache-namespace", nodePodRights)
	}
	out := make([]namespaceRights, 0, len(order)+1)
	for _, ns := range order {
		out = append(out, *byNS[ns])
	}
	if o.RemoteSeal.Listen != "" {
		out = append(out, namespaceRights{namespace: o.RemoteSeal.PartnerNamespace, why: []string{"--remote-seal-partner-namespace"}, rights: partnerRights,
			grant: "a Role there granting create, get, list and watch on secrets (chart: remoteSeal.enabled makes <fullname>-operator-secrets)"})
	}
	return out
}

// podNamespaces lists the namespaces the operator keeps pods, ConfigMaps and disruption
// budgets in; nil when sealer pods follow their batches into every namespace it serves.
func (o *Options) podNamespaces() []string {
	if o.SealerNamespace == "" {
		return nil
	}
	out := []string{o.SealerNamespace, o.ScrubNamespace}
	if o.ParentCacheNamespace != "" {
		out = append(out, o.ParentCacheNamespace)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// accessReviewer creates SelfSubjectAccessReviews (a client.Client does).
type accessReviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// checkPodRights asks the API server, as the operator's own identity, whether it holds every
// right requiredPodRights names, and refuses with each namespace that lacks some, the settings
// that put it there and the Role that should grant them.
func (o *Options) checkPodRights(ctx context.Context, c accessReviewer) error {
	var problems []string
	for _, nr := range o.requiredPodRights() {
		var missing []string
		for _, r := range nr.rights {
			rev := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: nr.namespace, Group: r.group, Resource: r.resource, Subresource: r.subresource, Verb: r.verb,
				},
			}}
			if err := c.Create(ctx, rev); err != nil {
				return fmt.Errorf("asking the API server whether the operator may %s in namespace %q: %w", r, nr.namespace, err)
			}
			if !rev.Status.Allowed {
				missing = append(missing, r.String())
			}
		}
		if len(missing) > 0 {
			problems = append(problems, o.describeMissing(nr, missing))
		}
	}
	if len(problems) > 0 {
		return &missingRightsError{problems: problems}
	}
	return nil
}

// describeMissing names the namespace, what the operator cannot do there, why it needs it and
// the Role that grants it.
func (o *Options) describeMissing(nr namespaceRights, missing []string) string {
	where := fmt.Sprintf("in namespace %q", nr.namespace)
	grant := "a Role there bound to the operator's ServiceAccount"
	switch {
	case nr.grant != "":
		grant = nr.grant
	case o.PodsRoleName != "":
		grant = fmt.Sprintf("the Role %s there (with its RoleBinding to the operator's ServiceAccount)", o.PodsRoleName)
	}
	if nr.namespace == "" {
		where = "in every namespace"
		grant = "a ClusterRole and ClusterRoleBinding (chart: operator.podRightsInBatchNamespaces=true), or set --sealer-namespace (chart: operator.sealerNamespace) so that sealer pods stay in one namespace"
	}
	return fmt.Sprintf("the operator may not %s %s (needed for %s): grant it with %s",
		strings.Join(missing, ", "), where, strings.Join(nr.why, ", "), grant)
}

// missingRightsError is checkPodRights' refusal.
type missingRightsError struct{ problems []string }

func (e *missingRightsError) Error() string {
	return "refusing to start: the operator's ServiceAccount lacks rights where it is configured to run pods:\n  " +
		strings.Join(e.problems, "\n  ")
}

// podReads reads pods from the cache where it holds them, and straight from the API server in
// any other namespace: a pod an operator with another --sealer-namespace created (before an
// upgrade) is still followed to its end, never taken for gone while it may write its slot.
type podReads struct {
	cached client.Reader
	direct client.Reader
	// namespaces the cache holds pods for; nil: every namespace it serves.
	namespaces []string
}

func (p podReads) in(ns string) client.Reader {
	if p.cachedIn(ns) {
		return p.cached
	}
	return p.direct
}

func (p podReads) cachedIn(ns string) bool {
	return p.namespaces == nil || slices.Contains(p.namespaces, ns) || p.direct == nil
}

// Get reads one pod. The cache's NotFound is asked of the API server again: the cache may not
// have a pod created a moment ago, and a pod taken for gone gets a second sealer on its slot.
func (p podReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := p.in(key.Namespace).Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && p.direct != nil && p.cachedIn(key.Namespace) {
		err = p.direct.Get(ctx, key, obj)
	}
	return explainForbidden(err, key.Namespace)
}

// List lists pods of one namespace.
func (p podReads) List(ctx context.Context, ns string, list client.ObjectList, opts ...client.ListOption) error {
	return explainForbidden(p.in(ns).List(ctx, list, append(opts, client.InNamespace(ns))...), ns)
}

// explainForbidden turns a refusal to read a namespace outside the operator's rights into the
// reason and the way out: the batch waits (its pod may still write the slot) until an admin acts.
func explainForbidden(err error, ns string) error {
	if err == nil || !apierrors.IsForbidden(err) {
		return err
	}
	return errors.Join(fmt.Errorf("the batch's pod is in namespace %q (created by an operator with another --sealer-namespace), where this operator may not read pods: "+
		"let it finish and delete it there, or grant the operator pod rights in %q (chart: operator.podRightsInBatchNamespaces=true) until it is gone", ns, ns), err)
}
