package render

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ComponentOutputCleanup labels the pods that delete a remote-seal sector's outputs.
const ComponentOutputCleanup = "output-cleanup"

// LabelOrder names the SealOrder an output-cleanup pod works for.
const LabelOrder = "sealfleet.io/order"

// OutputCleanupInput is what one output-cleanup pod deletes, and where.
type OutputCleanupInput struct {
	// Namespace holds the operator's node pods; Order names the order (and the pod).
	Namespace, Order, OrderUID, Node string
	// OutputPath is the host output root; Paths are relative to it.
	OutputPath  string
	Paths       []string
	HostNetwork bool
	PullSecrets []string
}

// OutputCleanupPodName is the pod that deletes an order's outputs.
func OutputCleanupPodName(order, uid string) string {
	return boundedName("output-cleanup-" + order + "-" + strings.TrimRight(uid[:min(8, len(uid))], "-"))
}

// OutputCleanupPod renders the short pod that deletes a sector's replica and cache directory
// once its remote-seal partner is done with them (`node-agent remove-outputs`, confined to the
// output root it mounts). Like scrub pods it belongs to the node, not to a tenant.
func OutputCleanupPod(in OutputCleanupInput, image string, pull corev1.PullPolicy) *corev1.Pod {
	meta := metav1.ObjectMeta{
		Name: OutputCleanupPodName(in.Order, in.OrderUID), Namespace: in.Namespace,
		Labels: map[string]string{LabelName: "sealfleet", LabelComponent: ComponentOutputCleanup, LabelOrder: in.Order},
	}
	args := append([]string{"remove-outputs", "--root", OutputMount}, in.Paths...)
	return nodePod(meta, in.Node, in.HostNetwork, "", in.PullSecrets,
		[]corev1.Volume{hostPathVolume("output", in.OutputPath, corev1.HostPathDirectory)},
		corev1.Container{
			Name: "remove-outputs", Image: image, ImagePullPolicy: pull,
			Command: []string{"/node-agent"}, Args: args,
			VolumeMounts:    []corev1.VolumeMount{{Name: "output", MountPath: OutputMount}},
			SecurityContext: nodePodSecurity(false),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resourceMilli(50), corev1.ResourceMemory: resourceMi(32)},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resourceMi(64)},
			},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		})
}
