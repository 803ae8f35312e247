package render

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// nodePod is a short pod that belongs to a node rather than a batch (parent-cache builder,
// scrub, qualification): confined to the node, never restarted, tolerating every taint like
// the node agent, without a ServiceAccount token; c is its one container.
func nodePod(meta metav1.ObjectMeta, node string, hostNetwork bool, priorityClass string, secrets []string, volumes []corev1.Volume, c corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			Affinity: OnNode(node), RestartPolicy: corev1.RestartPolicyNever,
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			HostNetwork:                  hostNetwork,
			PriorityClassName:            priorityClass,
			ImagePullSecrets:             pullSecrets(secrets),
			AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false),
			Volumes:    volumes,
			Containers: []corev1.Container{c},
		},
	}
}

// layerMounts mounts a node pod's ready layer devices: block devices one by one (which needs
// a privileged container), files through the host path root they lie under (a file outside
// every root is never mounted). paths are the devices mounted, in order.
func layerMounts(devices []sealv1.LayerDeviceStatus, roots []string) (volumes []corev1.Volume, mounts []corev1.VolumeMount, paths []string, privileged bool) {
	mounted := map[string]bool{}
	for i, d := range devices {
		if !d.Ready || d.Path == "" {
			continue
		}
		mount, t := d.Path, corev1.HostPathBlockDev
		if isDevPath(d.Path) {
			privileged = true
		} else if mount, t = rootOf(roots, d.Path), corev1.HostPathDirectory; mount == "" {
			continue
		}
		paths = append(paths, d.Path)
		if mounted[mount] {
			continue
		}
		mounted[mount] = true
		name := "layer-" + strconv.Itoa(i)
		volumes = append(volumes, hostPathVolume(name, mount, t))
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: mount})
	}
	return volumes, mounts, paths, privileged
}

// nodePodSecurity is root with every capability dropped, or privileged where block devices
// are mounted.
func nodePodSecurity(privileged bool) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), Privileged: ptr.To(privileged)}
	if !privileged {
		sc.AllowPrivilegeEscalation = ptr.To(false)
		sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	}
	return sc
}
