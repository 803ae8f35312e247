package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(ns, name, component, ip string, phase corev1.PodPhase, ports ...corev1.ContainerPort) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		Spec:       corev1.PodSpec{NodeName: "127.0.0.1", Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status:     corev1.PodStatus{Phase: phase, PodIP: ip},
	}
	if component != "" {
		p.Labels[componentLabel] = component
	}
	return p
}

func TestScrapeTargets(t *testing.T) {
	sealer := pod("batches", "cc-sealer", "sealer", "127.0.0.1", corev1.PodRunning, corev1.ContainerPort{Name: "debug", ContainerPort: 9464})
	sealer.Labels[batchLabel] = "cc"
	agent := pod("sealfleet-system", "agent-x", "node-agent", "127.0.0.1", corev1.PodRunning,
		corev1.ContainerPort{Name: "health", ContainerPort: 8081}, corev1.ContainerPort{Name: "metrics", ContainerPort: 8090})
	operator := pod("sealfleet-system", "operator-y", "operator", "127.0.0.1", corev1.PodRunning, corev1.ContainerPort{ContainerPort: 8080})
	pods := []corev1.Pod{
		sealer, agent, operator,
		pod("sealfleet-system", "operator-old", "operator", "127.0.0.1", corev1.PodSucceeded, corev1.ContainerPort{ContainerPort: 8080}),
		pod("sealfleet-system", "operator-kwok", "operator", "10.0.0.7", corev1.PodRunning, corev1.ContainerPort{ContainerPort: 8080}),
		pod("sealfleet-system", "webhook", "webhook", "127.0.0.1", corev1.PodRunning, corev1.ContainerPort{ContainerPort: 9443}),
		pod("sealfleet-system", "agent-noport", "node-agent", "127.0.0.1", corev1.PodRunning, corev1.ContainerPort{Name: "health", ContainerPort: 8081}),
	}
	got := ScrapeTargets(pods)
	want := map[string][]TargetGroup{
		"operator":   {{Targets: []string{"127.0.0.1:8080"}, Labels: map[string]string{"namespace": "sealfleet-system", "pod": "operator-y", "node": "127.0.0.1"}}},
		"node-agent": {{Targets: []string{"127.0.0.1:8090"}, Labels: map[string]string{"namespace": "sealfleet-system", "pod": "agent-x", "node": "127.0.0.1"}}},
		"sealer":     {{Targets: []string{"127.0.0.1:9464"}, Labels: map[string]string{"namespace": "batches", "pod": "cc-sealer", "node": "127.0.0.1", "batch": "cc"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets\n got %+v\nwant %+v", got, want)
	}

	dir := filepath.Join(t.TempDir(), "sd")
	if err := writeTargetFiles(dir, ScrapeTargets(pods[:1])); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 3 {
		t.Errorf("files written: %v, want the three .json and no .tmp", files)
	}
	data, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	if err != nil || string(data) != "[]" {
		t.Errorf("operator.json without an operator pod: %q %v (want [])", data, err)
	}
	var sealers []TargetGroup
	data, _ = os.ReadFile(filepath.Join(dir, "sealer.json"))
	if err := json.Unmarshal(data, &sealers); err != nil || len(sealers) != 1 || sealers[0].Labels["batch"] != "cc" {
		t.Errorf("sealer.json: %s %v", data, err)
	}
}

func TestScrapeTargetsCommand(t *testing.T) {
	operator := pod("sealfleet-system", "operator-y", "operator", "127.0.0.1", corev1.PodRunning, corev1.ContainerPort{Name: "metrics", ContainerPort: 8080})
	dir := t.TempDir()
	out, errOut, code := run(t, fakeClient(&operator), "", "scrape-targets", "--dir", dir)
	if code != 0 || out != "1 targets written to "+dir+"\n" {
		t.Fatalf("exit %d %q %q", code, out, errOut)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "operator.json"))
	if want := `[{"targets":["127.0.0.1:8080"],"labels":{"namespace":"sealfleet-system","node":"127.0.0.1","pod":"operator-y"}}]`; string(data) != want {
		t.Errorf("operator.json %s, want %s", data, want)
	}
}
