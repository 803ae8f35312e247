package e2e

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterDNS is the kube-dns Service of the local cluster (hack/coredns.yaml).
const clusterDNS = "10.96.0.10:53"

// checkChartDefaults: the chart as `hack/demo.sh install` installs it (its defaults but for the
// images and intervals) runs as on any cluster with a pod network: its CRDs are the release's,
// the operator and the node agent are pods on the pod network (not the host's), the API server
// they reach is the kubernetes Service's endpoint at the node's address, and the cluster DNS
// answers for the release's Services.
func checkChartDefaults(t *testing.T) {
	ctx := context.Background()
	for _, crd := range []string{"sealbatches.sealfleet.io", "sealernodes.sealfleet.io", "sealorders.sealfleet.io"} {
		out, err := exec.Command(filepath.Join(repo, "bin", "kubectl"), "--kubeconfig", filepath.Join(clusterDir, "pki", "admin.kubeconfig"),
			"get", "crd", crd, "-o", `jsonpath={.metadata.annotations.meta\.helm\.sh/release-name}`).CombinedOutput()
		if err != nil || string(out) != "sealfleet" {
			t.Errorf("CRD %s is not the chart's (release annotation %q, %v)", crd, out, err)
		}
	}

	_, podNet, _ := net.ParseCIDR(nodeIP + "/24")
	for _, component := range []string{"operator", "node-agent"} {
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace("sealfleet-system"),
			client.MatchingLabels{"app.kubernetes.io/instance": "sealfleet", "app.kubernetes.io/component": component}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			t.Errorf("no %s pod", component)
		}
		for _, p := range pods.Items {
			ip := net.ParseIP(p.Status.PodIP)
			if p.Spec.HostNetwork || ip == nil || !podNet.Contains(ip) || ip.Equal(net.ParseIP(nodeIP)) {
				t.Errorf("%s pod %s: hostNetwork %v, pod IP %q (want an address of the pod network %s)", component, p.Name, p.Spec.HostNetwork, p.Status.PodIP, podNet)
			}
		}
	}

	var eps discoveryv1.EndpointSliceList
	if err := k8s.List(ctx, &eps, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		t.Fatal(err)
	}
	var apiAddrs []string
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			apiAddrs = append(apiAddrs, e.Addresses...)
		}
	}
	if !slices.Equal(apiAddrs, []string{nodeIP}) {
		t.Errorf("the kubernetes Service's endpoints are %v, want the node's address %s", apiAddrs, nodeIP)
	}

	// From the host, through kube-proxy's route to the kube-dns Service, as a pod's resolver asks.
	dns := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, clusterDNS)
	}}
	var svcs corev1.ServiceList
	if err := k8s.List(ctx, &svcs, client.InNamespace("sealfleet-system")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kubernetes.default.svc.cluster.local.": "10.96.0.1"}
	for _, s := range svcs.Items {
		if strings.HasPrefix(s.Name, "sealfleet") && s.Spec.ClusterIP != corev1.ClusterIPNone && s.Spec.ClusterIP != "" {
			want[s.Name+".sealfleet-system.svc.cluster.local."] = s.Spec.ClusterIP
		}
	}
	if len(want) < 2 {
		t.Errorf("the release has no Service with a cluster IP in sealfleet-system: %d Services", len(svcs.Items))
	}
	for name, ip := range want {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := dns.LookupHost(lctx, name)
		cancel()
		if err != nil || !slices.Equal(got, []string{ip}) {
			t.Errorf("cluster DNS %s: %s is %v (%v), want %s", clusterDNS, name, got, err, ip)
		}
	}
	t.Logf("chart defaults on the pod network: CRDs the release's, operator and agent on %s, API server at %s, %d names resolved", podNet, nodeIP, len(want))
}
