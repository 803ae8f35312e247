package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

// parentCacheRetry is how long a failed builder pod stays (its log readable) before the next
// try replaces it.
const parentCacheRetry = time.Minute

// ParentCaches has the parent caches built that nodes need: one builder pod per node and
// graph (`sealer parent-cache`), started when a batch waits for the cache, when the node's
// spec asks for it ahead, or when a sealer found the cache corrupt; finished pods are removed
// once the node agent reports the cache verified. The node's cache directory on disk, as the
// agent reports it, is the record; nothing else is stored.
type ParentCaches struct {
	client.Client
	// Namespace holds the builder pods.
	Namespace string
	Pod       render.PodOptions

	mu sync.Mutex
	// rebuilds are caches a sealer found corrupt, by builder name, with when: their status
	// may still say verified until the builder rewrites the manifest.
	rebuilds map[string]time.Time
	// causes are the failed sealer pods that already asked for a rebuild (a failed pod stays
	// until the next attempt starts; after an operator restart one more rebuild only checks
	// the cache and keeps it).
	causes map[types.UID]bool
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete

// Sync runs one pass over the fleet: wanted maps a node to the proofs batches wait for there.
func (p *ParentCaches) Sync(ctx context.Context, nodes []sealv1.SealerNode, wanted map[string]map[string]bool) error {
	pods, err := p.builders(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for i := range nodes {
		sn := &nodes[i]
		proofs := map[string]bool{}
		for pr := range wanted[sn.Name] {
			proofs[pr] = true
		}
		if sn.Spec.ParentCache != nil && meta.IsStatusConditionTrue(sn.Status.Conditions, sealv1.CondReady) {
			for _, pr := range sn.Spec.ParentCache.Proofs {
				proofs[pr] = true
			}
		}
		for proof := range proofs {
			if cacheVerified(sn, proof) && !p.rebuilding(render.ParentCacheBuilderName(sn.Name, proof)) {
				continue
			}
			if err := p.ensure(ctx, sn, proof, pods); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Finished builders of verified caches go.
	byName := map[string]*sealv1.SealerNode{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	for _, pod := range pods {
		sn := byName[pod.Annotations[render.AnnotationCacheNode]]
		proof := pod.Annotations[render.AnnotationCacheProof]
		if finished(pod) && (sn == nil || cacheVerified(sn, proof)) && !p.rebuilding(pod.Name) {
			if err := p.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("parent caches: %v", errs)
	}
	return nil
}

// Rebuild has proof's cache on node checked and rebuilt: the sealer of pod cause found it
// missing or corrupt. Once per cause.
func (p *ParentCaches) Rebuild(ctx context.Context, sn *sealv1.SealerNode, proof string, cause types.UID) error {
	name := render.ParentCacheBuilderName(sn.Name, proof)
	p.mu.Lock()
	if p.causes[cause] {
		p.mu.Unlock()
		return nil
	}
	if p.rebuilds == nil {
		p.rebuilds, p.causes = map[string]time.Time{}, map[types.UID]bool{}
	}
	p.rebuilds[name] = time.Now()
	p.causes[cause] = true
	p.mu.Unlock()
	var old corev1.Pod
	if err := p.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, &old); err == nil && finished(&old) {
		if err := p.Delete(ctx, &old); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return p.create(ctx, sn, proof)
}

// Wait says why proof's cache on node is not ready for a sealer ("" when it is).
func (p *ParentCaches) Wait(ctx context.Context, sn *sealv1.SealerNode, proof string) (string, error) {
	name := render.ParentCacheBuilderName(sn.Name, proof)
	if p.rebuilding(name) {
		var pod corev1.Pod
		err := p.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, &pod)
		switch {
		case err == nil && pod.Status.Phase == corev1.PodSucceeded && cacheVerified(sn, proof):
			p.mu.Lock()
			delete(p.rebuilds, name)
			p.mu.Unlock()
		case err != nil && !apierrors.IsNotFound(err):
			return "", err
		case err == nil && pod.Status.Phase == corev1.PodFailed:
			return fmt.Sprintf("parent cache for %s on %s: its rebuild failed (pod %s/%s)", proof, sn.Name, p.Namespace, name), nil
		default:
			return fmt.Sprintf("parent cache for %s on %s is being rebuilt", proof, sn.Name), nil
		}
	}
	if !cacheVerified(sn, proof) {
		return fmt.Sprintf("parent cache for %s on %s is not verified", proof, sn.Name), nil
	}
	return "", nil
}

func (p *ParentCaches) rebuilding(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.rebuilds[name]
	return ok
}

// ensure starts the builder of proof's cache on node unless one runs, or one failed less than
// parentCacheRetry ago.
func (p *ParentCaches) ensure(ctx context.Context, sn *sealv1.SealerNode, proof string, pods map[string]*corev1.Pod) error {
	name := render.ParentCacheBuilderName(sn.Name, proof)
	if pod, ok := pods[name]; ok {
		if !finished(pod) || time.Since(finishedAt(pod)) < parentCacheRetry {
			return nil
		}
		// Finished and the cache is still not verified: try again.
		if err := p.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return err
		}
		return nil // created on the next pass, once the old pod is gone
	}
	return p.create(ctx, sn, proof)
}

func (p *ParentCaches) create(ctx context.Context, sn *sealv1.SealerNode, proof string) error {
	pod := render.ParentCacheBuilder(render.ParentCacheInput{Node: sn.Name, Proof: proof, HostPath: sn.Spec.CachePath(),
		Namespace: p.Namespace, HostNetwork: p.Pod.HostNetwork}, p.Pod)
	if err := p.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("builder of the %s parent cache on %s: %w", proof, sn.Name, err)
	}
	log.FromContext(ctx).Info("building parent cache", "node", sn.Name, "proof", proof, "pod", pod.Name)
	return nil
}

// builders lists the builder pods by name.
func (p *ParentCaches) builders(ctx context.Context) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := p.List(ctx, &list, client.InNamespace(p.Namespace),
		client.MatchingLabels{render.LabelComponent: render.ComponentParentCache}); err != nil {
		return nil, err
	}
	out := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// cacheVerified: the node agent reports proof's cache verified on the node.
func cacheVerified(sn *sealv1.SealerNode, proof string) bool {
	for _, c := range sn.Status.ParentCaches {
		if c.Proof == proof {
			return c.Verified
		}
	}
	return false
}

func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// finishedAt is when the pod's container ended (its creation when unknown).
func finishedAt(pod *corev1.Pod) time.Time {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return t.FinishedAt.Time
		}
	}
	return pod.CreationTimestamp.Time
}
