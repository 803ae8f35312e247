package render

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// ComponentQualify labels qualification pods.
const ComponentQualify = "qualify"

// Annotations of a qualification pod: its node, the slot its write test may write (absent:
// none), the sealfleet.io/qualify request it answers and the devices it measures.
const (
	AnnotationQualifyNode    = "sealfleet.io/qualify-node"
	AnnotationQualifySlot    = "sealfleet.io/qualify-slot"
	AnnotationQualifyRequest = "sealfleet.io/qualify-request"
	AnnotationQualifyDevices = "sealfleet.io/qualify-devices"
)

// QualificationLinePrefix marks the document in the qualification pod's log (the termination
// message holds 4 KiB at most).
const QualificationLinePrefix = "SEALER_QUALIFICATION "

// QualifyInput is one node's qualification.
type QualifyInput struct {
	// Namespace holds the operator's node pods.
	Namespace string
	Node      string
	// Roots are the node's hostPathRoots (file-backed devices are reached through them).
	Roots   []string
	Devices []sealv1.LayerDeviceStatus
	// WriteSlot is the slot booked for the write test and WriteRange its range on every
	// device (nil: reads only, NoWriteReason says why).
	WriteSlot     *int32
	WriteRange    sealv1.SlotRange
	NoWriteReason string
	// Hugepage: the pod holds one 1 GiB hugepage and maps it (booked by the operator).
	Hugepage bool
	// Seconds per measurement.
	Seconds float64
	// Request is the sealfleet.io/qualify value answered; DevicesKey the devices measured.
	Request, DevicesKey string
	HostNetwork         bool
}

// QualifyPodName is a node's qualification pod.
func QualifyPodName(node string) string {
	return boundedName("qualify-" + strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(node)))
}

// DevicesKey names a node's usable layer devices as a qualification measures them.
func DevicesKey(devs []sealv1.LayerDeviceStatus) string {
	var names []string
	for _, d := range devs {
		if d.Path != "" {
			names = append(names, d.Path)
		}
	}
	return strings.Join(names, ",")
}

// QualifyPod renders the short pod that measures a node with `sealer qualify`: each layer
// device's random reads and sequential bandwidth (reads anywhere; writes only inside the
// booked slot), the hashing rate, hugepages and memory bandwidth. It belongs to the node like
// the scrub and tolerates every taint.
func QualifyPod(in QualifyInput, o PodOptions) *corev1.Pod {
	args := []string{"qualify", "--seconds", strconv.FormatFloat(in.Seconds, 'f', -1, 64), "--termination-log", "/dev/termination-log", "--threads", "2"}
	ann := map[string]string{AnnotationQualifyNode: in.Node, AnnotationQualifyRequest: in.Request, AnnotationQualifyDevices: in.DevicesKey}
	if in.WriteSlot != nil {
		args = append(args, "--write-range", fmt.Sprintf("%d:%d", in.WriteRange.OffsetBytes, in.WriteRange.LengthBytes))
		ann[AnnotationQualifySlot] = strconv.Itoa(int(*in.WriteSlot))
	} else if in.NoWriteReason != "" {
		args = append(args, "--no-write-reason", in.NoWriteReason)
	}
	res := corev1.ResourceList{corev1.ResourceMemory: resourceMi(512)}
	var volumes []corev1.Volume
	var hugeMounts []corev1.VolumeMount
	if in.Hugepage {
		args = append(args, "--hugepages-probe", "1")
		res[corev1.ResourceName("hugepages-1Gi")] = *resource.NewQuantity(1<<30, resource.BinarySI)
		volumes = append(volumes, corev1.Volume{Name: "hugepages", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: "HugePages-1Gi"}}})
		hugeMounts = append(hugeMounts, corev1.VolumeMount{Name: "hugepages", MountPath: HugepagesMount})
	} else {
		args = append(args, "--hugepages-probe", "0")
	}
	devVolumes, mounts, paths, privileged := layerMounts(in.Devices, in.Roots)
	for _, p := range paths {
		args = append(args, "--device", p)
	}
	meta := metav1.ObjectMeta{
		Name: QualifyPodName(in.Node), Namespace: in.Namespace,
		Labels:      map[string]string{LabelName: "sealfleet", LabelComponent: ComponentQualify},
		Annotations: ann,
	}
	return nodePod(meta, in.Node, in.HostNetwork, o.PriorityClassName, o.PullSecrets, append(volumes, devVolumes...), corev1.Container{
		Name: "qualify", Image: o.Image, ImagePullPolicy: o.ImagePullPolicy,
		Command: []string{"/sealer"}, Args: args, VolumeMounts: append(hugeMounts, mounts...),
		SecurityContext: nodePodSecurity(privileged),
		Resources: corev1.ResourceRequirements{
			Requests: mergeResources(corev1.ResourceList{corev1.ResourceCPU: resourceMilli(1000)}, res),
			Limits:   res,
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
}

func mergeResources(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
