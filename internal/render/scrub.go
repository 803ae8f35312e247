package render

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// ComponentScrub labels scrub pods.
const ComponentScrub = "scrub"

// Annotations of a scrub pod: the node and the slot whose range it discards, and the UID of
// the batch that left the range dirty (a pod of an earlier record is never taken for this one).
const (
	AnnotationScrubNode     = "sealfleet.io/scrub-node"
	AnnotationScrubSlot     = "sealfleet.io/scrub-slot"
	AnnotationScrubBatchUID = "sealfleet.io/scrub-batch-uid"
)

// ScrubInput is a dirty slot: the byte range [Offset, Offset+Length) of every device.
type ScrubInput struct {
	// Namespace holds the operator's node pods (scrubs and parent-cache builders), never a
	// tenant's: no tenant quota, admission policy or pods/exec right reaches them.
	Namespace string
	Node      string
	Slot      int32
	// BatchUID is the batch that left the range dirty.
	BatchUID string
	// Roots are the node's hostPathRoots: layer files are reached through the root they lie
	// under (mounted whole), so the scrub can check on the node that a file's real path stays
	// there.
	Roots   []string
	Devices []sealv1.LayerDeviceStatus
	Offset  int64
	Length  int64
	// HostNetwork runs the pod on the host network (nodes without pod networking, like the
	// sealer pods under --sealer-host-network).
	HostNetwork bool
	// PullSecrets name the image pull secrets for the scrub image.
	PullSecrets []string
}

// ScrubPodName is the pod that scrubs slot of node after the batch batchUID.
func ScrubPodName(node string, slot int32, batchUID string) string {
	return boundedName("scrub-" + strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(node)) +
		"-slot-" + strconv.Itoa(int(slot)) + "-" + strings.TrimRight(batchUID[:min(8, len(batchUID))], "-"))
}

// boundedName keeps a derived object name within the 253 characters of a DNS subdomain: a
// longer one keeps its head and ends in a digest of the whole.
func boundedName(name string) string {
	const limit = 253
	if len(name) <= limit {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:limit-17], "-") + "-" + hex.EncodeToString(sum[:8])
}

// ScrubPod renders the short pod that discards a dirty slot's layer ranges on its node
// (`node-agent scrub`: BLKDISCARD on block devices, hole punching on files), so the next batch
// starts on clean space and freed file space returns to the filesystem. Like the parent-cache
// builder it belongs to the node, not to a batch, and tolerates every taint; the operator does
// not start one on a node marked out of service.
func ScrubPod(in ScrubInput, image string, pull corev1.PullPolicy) *corev1.Pod {
	args := []string{"scrub", "--offset", strconv.FormatInt(in.Offset, 10), "--length", strconv.FormatInt(in.Length, 10)}
	for _, r := range in.Roots {
		args = append(args, "--root", r)
	}
	volumes, mounts, paths, privileged := layerMounts(in.Devices, in.Roots)
	args = append(args, paths...)
	meta := metav1.ObjectMeta{
		Name: ScrubPodName(in.Node, in.Slot, in.BatchUID), Namespace: in.Namespace,
		Labels: map[string]string{LabelName: "sealfleet", LabelComponent: ComponentScrub},
		Annotations: map[string]string{AnnotationScrubNode: in.Node, AnnotationScrubSlot: strconv.Itoa(int(in.Slot)),
			AnnotationScrubBatchUID: in.BatchUID},
	}
	return nodePod(meta, in.Node, in.HostNetwork, "", in.PullSecrets, volumes, corev1.Container{
		Name: "scrub", Image: image, ImagePullPolicy: pull,
		Command: []string{"/node-agent"}, Args: args, VolumeMounts: mounts, SecurityContext: nodePodSecurity(privileged),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resourceMilli(100), corev1.ResourceMemory: resourceMi(64)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resourceMi(64)},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
}

// rootOf is the root p lies under, or "".
func rootOf(roots []string, p string) string {
	for _, r := range roots {
		if strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return r
		}
	}
	return ""
}
