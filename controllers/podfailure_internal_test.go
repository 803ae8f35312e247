package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/contracts"
	"github.com/sealfleet/sealfleet/internal/render"
)

// The sealer's exit codes map to typed reasons and a retry decision (sealer-image/README.md).
func TestPodFailureNamesTheSealersExit(t *testing.T) {
	exited := func(code int32, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}},
		}}}}
	}
	for _, c := range []struct {
		pod       *corev1.Pod
		reason    sealv1.Reason
		retriable bool
		says      string
	}{
		{exited(2, "invalid input: layout"), sealv1.ReasonSealerFailed, false, "sealer exited 2 (bad input): invalid input: layout"},
		{exited(7, "data mismatch: sector 3"), sealv1.ReasonDataMismatch, false, "sector 3"},
		{exited(8, "GPU engine: no usable OpenCL device: there is no OpenCL device 0"), sealv1.ReasonGPUFailed, true, "sealer exited 8 (GPU engine: no usable OpenCL device, or the device failed): GPU engine: no usable OpenCL device"},
		{exited(3, "storage error: write"), sealv1.ReasonSealerFailed, true, "device or I/O failure"},
		{&corev1.Pod{Status: corev1.PodStatus{Reason: "Evicted", Message: "memory"}}, sealv1.ReasonPodEvicted, true, "evicted: memory"},
		// The output claim: another batch's directory fails the batch (a retry meets the same
		// owner); any other failure of the claim is retried.
		{claimExited(render.ExitOutputOwned, "output directory /output/ns/b belongs to batch ns/b (uid u1"), sealv1.ReasonOutputOwned, false, "belongs to batch ns/b"},
		{claimExited(1, "read-only file system"), sealv1.ReasonSealerFailed, true, "claiming the output directory failed (exit 1): read-only file system"},
	} {
		reason, msg, retriable := podFailure(c.pod)
		if reason != c.reason || retriable != c.retriable || !strings.Contains(msg, c.says) {
			t.Errorf("got %s %v %q, want %s %v and %q", reason, retriable, msg, c.reason, c.retriable, c.says)
		}
	}
}

// The exits the operator acts on by number are the table's (contracts/exit-codes.json): a
// renumbering on one side fails here or in the sealer's own test of the table.
func TestExitConstantsAreTheContracts(t *testing.T) {
	for code, name := range map[int32]string{exitParentCache: "parent-cache", exitDataMismatch: "data-mismatch", exitGPU: "device"} {
		if c, ok := contracts.Exit(code); !ok || c.Name != name {
			t.Errorf("exit %d is %+v in contracts/exit-codes.json, the operator takes it for %s", code, c, name)
		}
	}
	for _, c := range contracts.ExitCodes() {
		if want := c.Operator == "fail"; deterministicExit(c.Code) != want {
			t.Errorf("exit %d (%s): deterministic %v, the table says %s", c.Code, c.Name, !want, c.Operator)
		}
	}
}

func claimExited(code int32, msg string) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
		Name: render.ClaimOutputContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}},
	}}}}
}
