package render

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// ComponentScrub labels scrub pods.
const ComponentScrub = "scrub"

// ScrubInput is a released slot: the byte range [Offset, Offset+Length) of every device.
type ScrubInput struct {
	Batch   *sealv1.SealBatch
	Node    string
	Devices []sealv1.LayerDeviceStatus
	Offset  int64
	Length  int64
	// HostNetwork runs the pod on the host network (nodes without pod networking, like the
	// sealer pods under --sealer-host-network).
	HostNetwork bool
	// PullSecrets name the image pull secrets for the scrub image.
	PullSecrets []string
}

// ScrubPod renders the short pod that discards a released slot's layer ranges on its node
// (`node-agent scrub`: BLKDISCARD on block devices, hole punching on files), so the next batch
// starts on clean space and freed file space returns to the filesystem.
func ScrubPod(in ScrubInput, image string, pull corev1.PullPolicy) *corev1.Pod {
	b := in.Batch
	args := []string{"scrub", "--offset", strconv.FormatInt(in.Offset, 10), "--length", strconv.FormatInt(in.Length, 10)}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	privileged := false
	for i, d := range in.Devices {
		if !d.Ready || d.Path == "" {
			continue
		}
		name := "layer-" + strconv.Itoa(i)
		t := corev1.HostPathFile
		if isDevPath(d.Path) {
			t, privileged = corev1.HostPathBlockDev, true
		}
		volumes = append(volumes, hostPathVolume(name, d.Path, t))
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: d.Path})
		args = append(args, d.Path)
	}
	sc := &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), Privileged: ptr.To(privileged)}
	if !privileged {
		sc.AllowPrivilegeEscalation = ptr.To(false)
		sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	}
	tolerations := []corev1.Toleration{}
	if b.Spec.Placement != nil {
		tolerations = append(tolerations, b.Spec.Placement.Tolerations...)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: ScrubPodName(b), Namespace: b.Namespace,
			Labels: componentLabels(b, ComponentScrub),
		},
		Spec: corev1.PodSpec{
			NodeName: in.Node, RestartPolicy: corev1.RestartPolicyNever, Tolerations: tolerations,
			HostNetwork:                  in.HostNetwork,
			ImagePullSecrets:             pullSecrets(in.PullSecrets),
			AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
			Volumes: volumes,
			Containers: []corev1.Container{{
				Name: "scrub", Image: image, ImagePullPolicy: pull,
				Command: []string{"/node-agent"}, Args: args, VolumeMounts: mounts, SecurityContext: sc,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resourceMilli(100), corev1.ResourceMemory: resourceMi(64)},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resourceMi(64)},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
}
