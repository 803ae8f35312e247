package render

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ComponentParentCache labels the pods that build a node's parent caches.
const ComponentParentCache = "parent-cache"

// ParentCacheMount is where sealer pods (read-only) and builder pods see the node's
// parent-cache directory.
const ParentCacheMount = "/parent-cache"

// Annotations of a builder pod: the node and the proof whose cache it builds.
const (
	AnnotationCacheNode  = "sealfleet.io/parent-cache-node"
	AnnotationCacheProof = "sealfleet.io/parent-cache-proof"
)

// ParentCacheInput is one cache to build: the proof's graph, on a node, into its directory.
type ParentCacheInput struct {
	Node, Proof, HostPath, Namespace string
	// HostNetwork: nodes without pod networking (as for sealer pods).
	HostNetwork bool
}

// ParentCacheBuilderName is the builder pod of proof's cache on node.
func ParentCacheBuilderName(node, proof string) string {
	return boundedName("parent-cache-" + strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(node+"-"+proof)))
}

// ParentCacheBuilder renders the pod that builds (or checks and keeps) one parent cache on its
// node with `sealer parent-cache`: storage-proofs-porep writes the file, the digest goes into
// the manifest the node agent reports. It tolerates every taint, like the node agent: the
// cache belongs to the node, whoever's batches it serves.
func ParentCacheBuilder(in ParentCacheInput, o PodOptions) *corev1.Pod {
	meta := metav1.ObjectMeta{
		Name: ParentCacheBuilderName(in.Node, in.Proof), Namespace: in.Namespace,
		Labels:      map[string]string{LabelName: "sealfleet", LabelComponent: ComponentParentCache},
		Annotations: map[string]string{AnnotationCacheNode: in.Node, AnnotationCacheProof: in.Proof},
	}
	volumes := []corev1.Volume{{Name: "parent-cache", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: in.HostPath, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}
	return nodePod(meta, in.Node, in.HostNetwork, o.PriorityClassName, o.PullSecrets, volumes, corev1.Container{
		Name: "build", Image: o.Image, ImagePullPolicy: o.ImagePullPolicy,
		Command:         []string{"/sealer", "parent-cache", "--proof", in.Proof, "--dir", ParentCacheMount},
		VolumeMounts:    []corev1.VolumeMount{{Name: "parent-cache", MountPath: ParentCacheMount}},
		SecurityContext: nodePodSecurity(false),
		// Building is CPU-bound and parallel; it takes what is free and yields to sealers.
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resourceMilli(100), corev1.ResourceMemory: resourceMi(256)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resourceMi(1024)},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
}
