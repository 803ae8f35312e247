// Package chart_test renders the sealfleet Helm chart with bin/helm for the main value
// combinations and checks the resulting objects. hack/test-chart.sh runs it (make test-chart);
// without bin/helm (hack/tools.sh helm) the tests skip.
package chart_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type obj = map[string]any

var root = func() string { r, _ := filepath.Abs("../../.."); return r }()

func helmBin(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(h); err != nil {
		t.Skipf("skipping chart tests: %s not found (build it with `hack/tools.sh helm`)", h)
	}
	return h
}

// template runs `helm template` and returns stdout, stderr and the error.
func template(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	// The oldest Kubernetes the chart supports (Chart.yaml kubeVersion; helm's default is older).
	return helm(t, append([]string{"template", "sf", filepath.Join(root, "charts", "sealfleet"), "-n", "sealfleet-system", "--kube-version", "1.32.0"}, args...)...)
}

// helm runs bin/helm and returns stdout, stderr and the error.
func helm(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// render templates the chart and parses every document.
func render(t *testing.T, args ...string) []obj {
	t.Helper()
	out, stderr, err := template(t, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, stderr)
	}
	return parse(t, out)
}

// parse splits rendered YAML into its documents.
func parse(t *testing.T, out string) []obj {
	t.Helper()
	var objs []obj
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(out, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o obj
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("parse rendered document: %v\n%s", err, doc)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

func find(objs []obj, kind, name string) obj {
	for _, o := range objs {
		if o["kind"] == kind && (name == "" || get(o, "metadata", "name") == name) {
			return o
		}
	}
	return nil
}

func count(objs []obj, kind string) int {
	n := 0
	for _, o := range objs {
		if o["kind"] == kind {
			n++
		}
	}
	return n
}

// get walks maps by key and slices by index ("0").
func get(o any, path ...string) any {
	cur := o
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i := 0
			for _, ch := range p {
				i = i*10 + int(ch-'0')
			}
			if i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func mustGet(t *testing.T, o any, path ...string) any {
	t.Helper()
	v := get(o, path...)
	if v == nil {
		t.Fatalf("missing %s", strings.Join(path, "."))
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func container(t *testing.T, workload obj) obj {
	t.Helper()
	return mustGet(t, workload, "spec", "template", "spec", "containers", "0").(obj)
}

func hasArg(args []string, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

func TestDefaults(t *testing.T) {
	objs := render(t)
	for _, kind := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"} {
		if n := count(objs, kind); n != 0 {
			t.Errorf("monitoring is off by default, but %d %s rendered", n, kind)
		}
	}
	if n := count(objs, "CustomResourceDefinition"); n != 3 {
		t.Fatalf("want 3 CRDs (SealBatch, SealerNode, SealOrder), got %d", n)
	}
	for _, o := range objs {
		if o["kind"] == "CustomResourceDefinition" && get(o, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
			t.Errorf("CRD %v lacks helm.sh/resource-policy: keep", get(o, "metadata", "name"))
		}
	}

	// Sealer pods get a class that outranks ordinary pods but never preempts them.
	if pc := find(objs, "PriorityClass", "sealfleet-sealer"); pc == nil || pc["preemptionPolicy"] != "Never" || pc["value"] != float64(1000000) {
		t.Errorf("sealer PriorityClass: %v", pc)
	}
	dep := find(objs, "Deployment", "sf-sealfleet-operator")
	if dep == nil {
		t.Fatal("no operator Deployment")
	}
	c := container(t, dep)
	if c["image"] != "localhost/sealfleet-operator:dev" {
		t.Errorf("operator image %v", c["image"])
	}
	args := strs(c["args"])
	for _, want := range []string{"--leader-elect=true", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081",
		"--sealer-image=localhost/sealfleet-sealer:dev", "--scrub-image=localhost/sealfleet-operator:dev",
		"--image-pull-policy=IfNotPresent", "--sealer-host-network=false", "--sealer-metrics-port=9464",
		"--sealer-memory-base=2Gi", "--sealer-priority-class=sealfleet-sealer", "--sealer-memory-per-sector=256Mi", "--progress-interval=10s", "--release-timeout=10m"} {
		if !hasArg(args, want) {
			t.Errorf("operator args %v lack %s", args, want)
		}
	}
	if get(c, "livenessProbe", "httpGet", "path") != "/healthz" || get(c, "readinessProbe", "httpGet", "path") != "/readyz" {
		t.Errorf("operator probes: %v / %v", c["livenessProbe"], c["readinessProbe"])
	}
	if get(dep, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true ||
		get(c, "securityContext", "allowPrivilegeEscalation") != false ||
		get(c, "securityContext", "readOnlyRootFilesystem") != true ||
		!reflect.DeepEqual(get(c, "securityContext", "capabilities", "drop"), []any{"ALL"}) {
		t.Errorf("operator is not restricted: pod %v container %v", get(dep, "spec", "template", "spec", "securityContext"), c["securityContext"])
	}
	if get(c, "resources", "requests", "cpu") == nil || get(c, "resources", "limits", "memory") == nil {
		t.Errorf("operator resources: %v", c["resources"])
	}
	svc := find(objs, "Service", "sf-sealfleet-operator-metrics")
	if svc == nil || get(svc, "spec", "ports", "0", "targetPort") != "metrics" {
		t.Errorf("metrics Service: %v", svc)
	}
	if !reflect.DeepEqual(get(svc, "spec", "selector"), get(dep, "spec", "selector", "matchLabels")) {
		t.Errorf("Service selector %v != Deployment selector %v", get(svc, "spec", "selector"), get(dep, "spec", "selector", "matchLabels"))
	}

	ds := find(objs, "DaemonSet", "")
	if ds == nil {
		t.Fatal("no node agent DaemonSet")
	}
	ps := mustGet(t, ds, "spec", "template", "spec").(obj)
	if !reflect.DeepEqual(ps["nodeSelector"], obj{"sealfleet.io/sealer": "true"}) {
		t.Errorf("agent nodeSelector %v", ps["nodeSelector"])
	}
	if ps["hostPID"] != false {
		t.Errorf("agent hostPID = %v", ps["hostPID"])
	}
	if !reflect.DeepEqual(ps["tolerations"], []any{obj{"operator": "Exists"}}) {
		t.Errorf("agent tolerations %v", ps["tolerations"])
	}
	ac := container(t, ds)
	// The default output path is visible to the agent (read-only) so it can report free space.
	var outMount, outVolume bool
	for _, m := range ac["volumeMounts"].([]any) {
		m := m.(obj)
		outMount = outMount || (m["mountPath"] == "/host/var/lib/sealfleet/output" && m["readOnly"] == true)
	}
	for _, v := range ps["volumes"].([]any) {
		hp, _ := v.(obj)["hostPath"].(obj)
		outVolume = outVolume || (hp != nil && hp["path"] == "/var/lib/sealfleet/output" && hp["type"] == "DirectoryOrCreate")
	}
	if !outMount || !outVolume {
		t.Errorf("default output path not mounted read-only into the agent: %v %v", ac["volumeMounts"], ps["volumes"])
	}
	// The sealer image reports its PC2 engines on each node: an init container runs
	// `sealer capabilities` into a volume the agent reads (--sealer-capabilities).
	inits, _ := ps["initContainers"].([]any)
	if len(inits) != 1 {
		t.Fatalf("agent init containers %v", ps["initContainers"])
	}
	ic := inits[0].(obj)
	if ic["image"] != "localhost/sealfleet-sealer:dev" || !reflect.DeepEqual(strs(ic["args"]), []string{"capabilities", "--out", "/run/sealfleet/capabilities.json"}) ||
		get(ic, "securityContext", "allowPrivilegeEscalation") != false || get(ic, "env", "0", "name") != "NVIDIA_VISIBLE_DEVICES" {
		t.Errorf("sealer-capabilities init container %v", ic)
	}
	aargs := strs(ac["args"])
	for _, want := range []string{"run", "--node-name=$(NODE_NAME)", "--root=/host", "--metrics-bind-address=:8090", "--sealer-capabilities=/run/sealfleet/capabilities.json"} {
		if !hasArg(aargs, want) {
			t.Errorf("agent args %v lack %s", aargs, want)
		}
	}
	if get(ac, "env", "0", "valueFrom", "fieldRef", "fieldPath") != "spec.nodeName" {
		t.Errorf("NODE_NAME not from the downward API: %v", ac["env"])
	}
	if get(ac, "securityContext", "privileged") != true {
		t.Errorf("agent not privileged")
	}
	mounts := map[string]obj{}
	for _, m := range ac["volumeMounts"].([]any) {
		mounts[m.(obj)["mountPath"].(string)] = m.(obj)
	}
	for path, ro := range map[string]bool{"/host/sys": false, "/host/proc": true, "/host/dev": true} {
		m, ok := mounts[path]
		if !ok {
			t.Errorf("agent lacks mount %s", path)
			continue
		}
		if got := m["readOnly"] == true; got != ro {
			t.Errorf("mount %s readOnly=%v, want %v", path, got, ro)
		}
	}

	ns := find(objs, "Namespace", "sealfleet-batches")
	if ns == nil {
		t.Fatal("no batch namespace")
	}
	// Its Pod Security level: TestBatchNamespaceIsPrivilegedOnlyWhereOperatorPodsRun.
	if role := find(objs, "Role", "sf-sealfleet-leader-election"); role == nil || get(role, "metadata", "namespace") != "sealfleet-system" {
		t.Errorf("leader election Role: %v", role)
	}
}

// The operator's Roles and ClusterRole together carry exactly the rules controller-gen
// generated; the ClusterRole alone never lets it create a pod, a ConfigMap or a budget.
func TestOperatorRBACMatchesGenerated(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var gen obj
	if err := yaml.Unmarshal(raw, &gen); err != nil {
		t.Fatal(err)
	}
	all := grants(gen["rules"])
	// Secrets are granted only with the remote-seal provider on (TestRemoteSeal).
	var want []string
	for _, g := range all {
		if !strings.HasPrefix(g, "/secrets:") {
			want = append(want, g)
		}
	}
	nodePodGrants := func(g string) bool {
		return strings.HasPrefix(g, "/pods") || strings.HasPrefix(g, "/configmaps") || strings.HasPrefix(g, "policy/poddisruptionbudgets")
	}

	objs := render(t)
	cr := find(objs, "ClusterRole", "sf-sealfleet-operator")
	if cr == nil {
		t.Fatal("no operator ClusterRole")
	}
	for _, g := range grants(cr["rules"]) {
		if nodePodGrants(g) {
			t.Errorf("default operator ClusterRole grants %s in every namespace", g)
		}
	}
	got := append(grants(cr["rules"]), grants(roleIn(t, objs, "sealfleet-system", "sf-sealfleet-operator-pods")["rules"])...)
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ClusterRole + pods Role grant\n%v\nwant (config/rbac/role.yaml; run `make manifests`)\n%v", got, want)
	}
	objs = render(t, "--set", "remoteSeal.enabled=true", "--set", "remoteSeal.tlsSecret=tls")
	got = append(grants(find(objs, "ClusterRole", "sf-sealfleet-operator")["rules"]), grants(roleIn(t, objs, "sealfleet-system", "sf-sealfleet-operator-pods")["rules"])...)
	got = append(got, grants(roleIn(t, objs, "sealfleet-system", "sf-sealfleet-operator-secrets")["rules"])...)
	sort.Strings(got)
	if !reflect.DeepEqual(got, all) {
		t.Errorf("with remoteSeal: ClusterRole + Roles grant\n%v\nwant\n%v", got, all)
	}
	if args := strs(container(t, find(objs, "Deployment", ""))["args"]); !hasArg(args, "--pods-role=sf-sealfleet-operator-pods") {
		t.Errorf("operator args %v lack --pods-role (named in its refusal to start)", args)
	}

	// Namespace-scoped: the ClusterRole keeps the cluster-scoped resources, a Role in each
	// watched namespace the batches' rights, the pods Role the node pods'.
	objs = render(t, "--set", "operator.watchNamespaces={team-a,team-b}", "--set", "batchNamespace.create=false")
	// The parent-cache builders go to a served namespace (the batch namespace is not one here).
	if args := strs(container(t, find(objs, "Deployment", ""))["args"]); !hasArg(args, "--parent-cache-namespace=team-a") || !hasArg(args, "--scrub-namespace=team-a") {
		t.Errorf("operator args %v: want the builders and scrubs in the first served namespace", args)
	}
	cr = find(objs, "ClusterRole", "sf-sealfleet-operator")
	for _, g := range grants(cr["rules"]) {
		if !strings.HasPrefix(g, "/nodes:") && !strings.HasPrefix(g, "sealfleet.io/sealernodes") &&
			g != "authentication.k8s.io/tokenreviews:create" && g != "authorization.k8s.io/subjectaccessreviews:create" {
			t.Errorf("namespace-scoped operator keeps a cluster-wide grant: %s", g)
		}
	}
	pods := grants(roleIn(t, objs, "team-a", "sf-sealfleet-operator-pods")["rules"])
	for _, ns := range []string{"team-a", "team-b"} {
		got := append(grants(cr["rules"]), grants(roleIn(t, objs, ns, "sf-sealfleet-operator")["rules"])...)
		got = append(got, pods...)
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("namespace %s: ClusterRole + Roles grant\n%v\nwant\n%v", ns, got, want)
		}
	}
	if args := strs(container(t, find(objs, "Deployment", ""))["args"]); !hasArg(args, "--watch-namespaces=team-a,team-b") {
		t.Errorf("operator args %v lack --watch-namespaces", args)
	}
}

// roleIn finds the Role name in namespace ns and checks that a RoleBinding of the same name
// binds it to the operator's ServiceAccount.
func roleIn(t *testing.T, objs []obj, ns, name string) obj {
	t.Helper()
	var role, binding obj
	for _, o := range objs {
		if get(o, "metadata", "namespace") == ns && get(o, "metadata", "name") == name {
			switch o["kind"] {
			case "Role":
				role = o
			case "RoleBinding":
				binding = o
			}
		}
	}
	if role == nil || binding == nil || get(binding, "roleRef", "kind") != "Role" || get(binding, "roleRef", "name") != name ||
		get(binding, "subjects", "0", "name") != "sf-sealfleet-operator" || get(binding, "subjects", "0", "namespace") != "sealfleet-system" {
		t.Fatalf("namespace %s: Role %s %v, RoleBinding %v", ns, name, role != nil, binding)
	}
	return role
}

// TestOperatorPodRights: for the default values and each documented combination, exactly
// which verbs on pods the operator's ServiceAccount holds in which namespaces ("*": every
// namespace), worked out from every binding the chart renders.
func TestOperatorPodRights(t *testing.T) {
	podVerbs := []string{"create", "delete", "get", "list", "watch"}
	for _, tc := range []struct {
		name string
		set  []string
		want map[string][]string
	}{
		{"defaults", nil, map[string][]string{"sealfleet-system": podVerbs}},
		{"sealer namespace", []string{"operator.sealerNamespace=sealers"}, map[string][]string{"sealers": podVerbs, "sealfleet-system": podVerbs}},
		{"node pods apart", []string{"operator.sealerNamespace=sealers", "operator.scrubNamespace=scrubs", "operator.parentCacheNamespace=caches"},
			map[string][]string{"sealers": podVerbs, "scrubs": podVerbs, "caches": podVerbs}},
		{"watch namespaces", []string{"operator.watchNamespaces={team-a,team-b}", "batchNamespace.create=false"}, map[string][]string{"team-a": podVerbs}},
		{"watch namespaces, sealers in one", []string{"operator.watchNamespaces={team-a,team-b,sealfleet-system}", "batchNamespace.create=false", "operator.sealerNamespace=team-b"},
			map[string][]string{"team-b": podVerbs, "sealfleet-system": podVerbs}},
		{"legacy", []string{"operator.podRightsInBatchNamespaces=true"}, map[string][]string{"*": podVerbs}},
		{"legacy, watch namespaces", []string{"operator.podRightsInBatchNamespaces=true", "operator.watchNamespaces={team-a,team-b}", "batchNamespace.create=false"},
			map[string][]string{"team-a": podVerbs, "team-b": podVerbs}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			objs := render(t, args...)
			if got := verbsOn(objs, "", "pods", "system:serviceaccount:sealfleet-system:sf-sealfleet-operator"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("operator's verbs on pods by namespace: %v, want %v", got, tc.want)
			}
			legacy := slices.Contains(tc.set, "operator.podRightsInBatchNamespaces=true")
			if args := strs(container(t, find(objs, "Deployment", ""))["args"]); hasArg(args, "--sealer-namespace=") != legacy {
				t.Errorf("operator args %v: sealer pods in the batch's namespace %v, want %v", args, !legacy, legacy)
			}
		})
	}
}

// TestRemoteSeal: the provider is off by default; on, the operator serves it behind its
// Service with the TLS Secret, may read Secrets in the release namespace only, and every
// node agent serves sector data on a host port with the signing key; settings it could not
// honour are refused.
func TestRemoteSeal(t *testing.T) {
	sa := "system:serviceaccount:sealfleet-system:sf-sealfleet-operator"
	objs := render(t)
	if find(objs, "Service", "sf-sealfleet-remote-seal") != nil || len(verbsOn(objs, "", "secrets", sa)) != 0 {
		t.Errorf("remote seal is on by default, or the operator reads Secrets: %v", verbsOn(objs, "", "secrets", sa))
	}
	objs = render(t, "--set", "remoteSeal.enabled=true", "--set", "remoteSeal.tlsSecret=provider-tls", "--set", "remoteSeal.service.type=LoadBalancer")
	if got := verbsOn(objs, "", "secrets", sa); !reflect.DeepEqual(got, map[string][]string{"sealfleet-system": {"create", "get", "list", "watch"}}) {
		t.Errorf("operator's verbs on Secrets: %v", got)
	}
	svc := find(objs, "Service", "sf-sealfleet-remote-seal")
	if svc == nil || get(svc, "spec", "type") != "LoadBalancer" || get(svc, "spec", "ports", "0", "port") != float64(443) ||
		get(svc, "spec", "selector", "app.kubernetes.io/component") != "operator" {
		t.Errorf("remote-seal Service: %v", svc)
	}
	// A fixed node port for partners outside the cluster; none on a ClusterIP Service.
	np := find(render(t, "--set", "remoteSeal.enabled=true", "--set", "remoteSeal.insecureHTTP=true", "--set", "remoteSeal.service.type=NodePort",
		"--set", "remoteSeal.service.nodePort=30443"), "Service", "sf-sealfleet-remote-seal")
	if get(np, "spec", "type") != "NodePort" || get(np, "spec", "ports", "0", "nodePort") != float64(30443) || get(np, "spec", "ports", "0", "port") != float64(80) {
		t.Errorf("NodePort remote-seal Service: %v", np)
	}
	// The port publicURL and partners use: remoteSeal.service.port, not the container's.
	if p := find(render(t, "--set", "remoteSeal.enabled=true", "--set", "remoteSeal.tlsSecret=provider-tls", "--set", "remoteSeal.service.port=8443"),
		"Service", "sf-sealfleet-remote-seal"); get(p, "spec", "ports", "0", "port") != float64(8443) || get(p, "spec", "ports", "0", "targetPort") != "remote-seal" {
		t.Errorf("remoteSeal.service.port=8443: %v", get(p, "spec", "ports"))
	}
	if get(svc, "spec", "ports", "0", "nodePort") != nil {
		t.Errorf("a node port set though none was asked for: %v", svc)
	}
	if _, stderr, err := template(t, "--set", "remoteSeal.enabled=true", "--set", "remoteSeal.insecureHTTP=true", "--set", "remoteSeal.service.nodePort=30443"); err == nil ||
		!strings.Contains(stderr, "remoteSeal.service.nodePort 30443: a ClusterIP Service has no node port") {
		t.Errorf("nodePort on a ClusterIP Service: err %v, %s", err, stderr)
	}
	dep := find(objs, "Deployment", "sf-sealfleet-operator")
	args := strs(container(t, dep)["args"])
	for _, want := range []string{"--remote-seal-listen=:8443", "--remote-seal-tls-cert=/etc/sealfleet/remote-seal-tls/tls.crt",
		"--remote-seal-partner-namespace=sealfleet-system", "--remote-seal-namespace=sealfleet-batches", "--remote-seal-data-key-secret=sf-sealfleet-sector-data-key"} {
		if !hasArg(args, want) {
			t.Errorf("operator args %v lack %s", args, want)
		}
	}
	if get(dep, "spec", "template", "spec", "volumes", "0", "secret", "secretName") != "provider-tls" {
		t.Errorf("TLS Secret not mounted: %v", get(dep, "spec", "template", "spec", "volumes"))
	}
	if key := find(objs, "Secret", "sf-sealfleet-sector-data-key"); key == nil || len(get(key, "data", "key").(string)) < 44 {
		t.Errorf("sector data key Secret: %v", key)
	}
	ds := find(objs, "DaemonSet", "")
	ac := container(t, ds)
	aargs := strs(ac["args"])
	for _, want := range []string{"--sector-data-bind-address=:9470", "--sector-data-key-file=/etc/sealfleet/sector-data-key/key", "--sector-data-root=/host/var/lib/sealfleet/output",
		"--sector-data-tls-ca-dir=/etc/sealfleet/sector-data-tls"} {
		if !hasArg(aargs, want) {
			t.Errorf("agent args %v lack %s", aargs, want)
		}
	}
	// HTTPS by default: the chart's CA, mounted into every agent, which issues itself a
	// certificate from it; a certificate the admin gives; plain HTTP only when asked for.
	ca := find(objs, "Secret", "sf-sealfleet-sector-data-ca")
	if ca == nil || ca["type"] != "kubernetes.io/tls" || get(ca, "data", "ca.crt") != get(ca, "data", "tls.crt") || len(get(ca, "data", "tls.key").(string)) < 100 {
		t.Errorf("sector-data CA Secret: %v", ca)
	}
	mounted := func(objs []obj) string {
		for _, v := range get(find(objs, "DaemonSet", ""), "spec", "template", "spec", "volumes").([]any) {
			if v.(map[string]any)["name"] == "sector-data-tls" {
				return get(v.(obj), "secret", "secretName").(string)
			}
		}
		return ""
	}
	if got := mounted(objs); got != "sf-sealfleet-sector-data-ca" {
		t.Errorf("agents mount %q as their sector-data TLS", got)
	}
	given := render(t, "--set", "remoteSeal.enabled=true", "--set", "remoteSeal.tlsSecret=provider-tls", "--set", "remoteSeal.sectorData.tls.mode=Secret",
		"--set", "remoteSeal.sectorData.tls.secretName=nodes-tls")
	if a := strs(container(t, find(given, "DaemonSet", ""))["args"]); !hasArg(a, "--sector-data-tls-cert=/etc/sealfleet/sector-data-tls/tls.crt") ||
		mounted(given) != "nodes-tls" || find(given, "Secret", "sf-sealfleet-sector-data-ca") != nil {
		t.Errorf("mode Secret: args %v, mounted %q", a, mounted(given))
	}
	plain := render(t, "--set", "remoteSeal.enabled=true", "--set", "remoteSeal.tlsSecret=provider-tls", "--set", "remoteSeal.sectorData.tls.mode=None")
	if a := strs(container(t, find(plain, "DaemonSet", ""))["args"]); !hasArg(a, "--sector-data-insecure-http") || mounted(plain) != "" {
		t.Errorf("mode None: args %v, mounted %q", a, mounted(plain))
	}
	if get(ac, "ports", "1", "hostPort") != float64(9470) {
		t.Errorf("agent sector data port: %v", ac["ports"])
	}
	for _, tc := range []struct{ set, want string }{
		{"remoteSeal.enabled=true", "remoteSeal.tlsSecret: name the kubernetes.io/tls Secret"},
		{"remoteSeal.enabled=true,remoteSeal.insecureHTTP=true,remoteSeal.outputPath=/data/out", "remoteSeal.outputPath /data/out is not one of nodeAgent.outputPaths"},
		{"remoteSeal.enabled=true,remoteSeal.insecureHTTP=true,remoteSeal.sectorData.tls.mode=Secret", "remoteSeal.sectorData.tls.secretName: name the kubernetes.io/tls Secret"},
		{"remoteSeal.enabled=true,remoteSeal.insecureHTTP=true,remoteSeal.sectorData.tls.mode=Plain", "sectorData/tls/mode"},
		{"remoteSeal.maxBatch=3", "maxBatch"},
		{"remoteSeal.minerPrefix=x0", "minerPrefix"},
	} {
		if _, stderr, err := template(t, "--set", tc.set); err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("--set %s: %v %s", tc.set, err, stderr)
		}
	}
}

// verbsOn resolves every ClusterRoleBinding and RoleBinding of the rendered objects naming
// user (a ServiceAccount as "system:serviceaccount:NS:NAME") and returns its verbs on
// group/resource by namespace, "*" for the cluster-wide ones.
func verbsOn(objs []obj, group, resource, user string) map[string][]string {
	parts := strings.Split(user, ":")
	saNS, saName := parts[2], parts[3]
	rulesOf := func(kind, ns, name string) []any {
		for _, o := range objs {
			if o["kind"] == kind && get(o, "metadata", "name") == name && (kind == "ClusterRole" || get(o, "metadata", "namespace") == ns) {
				r, _ := o["rules"].([]any)
				return r
			}
		}
		return nil
	}
	out := map[string][]string{}
	for _, b := range objs {
		kind := b["kind"]
		if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
			continue
		}
		bound := false
		for _, s := range b["subjects"].([]any) {
			s := s.(obj)
			bound = bound || (s["kind"] == "ServiceAccount" && s["name"] == saName && s["namespace"] == saNS)
		}
		if !bound {
			continue
		}
		ns := "*"
		if kind == "RoleBinding" {
			ns = get(b, "metadata", "namespace").(string)
		}
		for _, r := range rulesOf(get(b, "roleRef", "kind").(string), ns, get(b, "roleRef", "name").(string)) {
			r := r.(obj)
			if !slices.Contains(strs(r["apiGroups"]), group) || !slices.Contains(strs(r["resources"]), resource) {
				continue
			}
			out[ns] = append(out[ns], strs(r["verbs"])...)
		}
	}
	for ns, vs := range out {
		sort.Strings(vs)
		out[ns] = slices.Compact(vs)
	}
	return out
}

// grants flattens RBAC rules to sorted "group/resource:verb,verb" entries, one per resource.
func grants(rules any) []string {
	var out []string
	for _, r := range rules.([]any) {
		r := r.(obj)
		var verbs []string
		for _, v := range r["verbs"].([]any) {
			verbs = append(verbs, v.(string))
		}
		sort.Strings(verbs)
		for _, g := range r["apiGroups"].([]any) {
			for _, res := range r["resources"].([]any) {
				out = append(out, fmt.Sprintf("%s/%s:%s", g, res, strings.Join(verbs, ",")))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestUserRolesAggregate: editors and viewers of a namespace get SealBatches through the
// built-in edit/admin and view roles.
func TestUserRolesAggregate(t *testing.T) {
	objs := render(t)
	ed, vw := find(objs, "ClusterRole", "sf-sealfleet-sealbatch-editor"), find(objs, "ClusterRole", "sf-sealfleet-sealbatch-viewer")
	if ed == nil || vw == nil {
		t.Fatal("no sealbatch-editor / -viewer ClusterRoles")
	}
	if get(ed, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-edit") != "true" ||
		get(ed, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-admin") != "true" ||
		get(vw, "metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-view") != "true" {
		t.Errorf("aggregation labels: editor %v viewer %v", get(ed, "metadata", "labels"), get(vw, "metadata", "labels"))
	}
	want := []string{"sealfleet.io/sealbatches/status:get", "sealfleet.io/sealbatches:create,delete,deletecollection,get,list,patch,update,watch"}
	if got := grants(ed["rules"]); !reflect.DeepEqual(got, want) {
		t.Errorf("editor grants %v", got)
	}
	for _, g := range grants(vw["rules"]) {
		if !strings.HasSuffix(g, ":get,list,watch") {
			t.Errorf("viewer may write: %s", g)
		}
	}
}

func TestNodeAgentRBACIsLeastPrivilege(t *testing.T) {
	cr := find(render(t), "ClusterRole", "sf-sealfleet-node-agent")
	want := `[{"apiGroups":[""],"resources":["nodes"],"verbs":["get"]},` +
		`{"apiGroups":["sealfleet.io"],"resources":["sealernodes"],"verbs":["get","create","patch"]},` +
		`{"apiGroups":["sealfleet.io"],"resources":["sealernodes/status"],"verbs":["patch"]},` +
		`{"apiGroups":["sealfleet.io"],"resources":["sealbatches"],"verbs":["list"]},` +
		`{"apiGroups":["authentication.k8s.io"],"resources":["tokenreviews"],"verbs":["create"]},` +
		`{"apiGroups":["authorization.k8s.io"],"resources":["subjectaccessreviews"],"verbs":["create"]}]`
	got, _ := json.Marshal(cr["rules"])
	if string(got) != want {
		t.Errorf("node agent rules\n got %s\nwant %s", got, want)
	}
}

func TestMonitoringEnabled(t *testing.T) {
	objs := render(t, "--set", "monitoring.enabled=true", "--set", "monitoring.labels.release=kps")
	sm := find(objs, "ServiceMonitor", "")
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if get(sm, "spec", "endpoints", "0", "port") != "metrics" || get(sm, "spec", "endpoints", "0", "honorLabels") != true {
		t.Errorf("ServiceMonitor endpoint %v", get(sm, "spec", "endpoints"))
	}
	if get(sm, "metadata", "labels", "release") != "kps" {
		t.Errorf("monitoring.labels not applied: %v", get(sm, "metadata", "labels"))
	}
	// Operator and node agents serve /metrics over HTTPS to authorized tokens: the monitors
	// present the chart's metrics-reader token, which may GET /metrics.
	secret := find(objs, "Secret", "sf-sealfleet-metrics-reader-token")
	if secret == nil || secret["type"] != "kubernetes.io/service-account-token" ||
		get(secret, "metadata", "annotations", "kubernetes.io/service-account.name") != "sf-sealfleet-metrics-reader" {
		t.Errorf("metrics reader token secret: %v", secret)
	}
	if crb := find(objs, "ClusterRoleBinding", "sf-sealfleet-metrics-reader"); crb == nil || get(crb, "roleRef", "name") != "sf-sealfleet-metrics-reader" ||
		get(crb, "subjects", "0", "name") != "sf-sealfleet-metrics-reader" {
		t.Errorf("metrics reader binding: %v", crb)
	}
	if cr := find(objs, "ClusterRole", "sf-sealfleet-metrics-reader"); cr == nil || !reflect.DeepEqual(cr["rules"], []any{obj{"nonResourceURLs": []any{"/metrics"}, "verbs": []any{"get"}}}) {
		t.Errorf("metrics reader role: %v", cr)
	}
	nodeAgentMon := find(objs, "PodMonitor", "sf-sealfleet-node-agent")
	for what, ep := range map[string]any{"ServiceMonitor": get(sm, "spec", "endpoints", "0"), "node-agent PodMonitor": get(nodeAgentMon, "spec", "podMetricsEndpoints", "0")} {
		if get(ep, "scheme") != "https" || get(ep, "authorization", "credentials", "name") != "sf-sealfleet-metrics-reader-token" ||
			get(ep, "authorization", "credentials", "key") != "token" || get(ep, "tlsConfig", "insecureSkipVerify") != true {
			t.Errorf("%s does not scrape with the metrics-reader token over HTTPS: %v", what, ep)
		}
	}
	for _, c := range []obj{container(t, find(objs, "Deployment", "")), container(t, find(objs, "DaemonSet", ""))} {
		if !hasArg(strs(c["args"]), "--metrics-secure=true") {
			t.Errorf("%v: args %v lack --metrics-secure=true", c["name"], c["args"])
		}
	}
	if get(container(t, find(objs, "DaemonSet", "")), "livenessProbe", "httpGet", "scheme") != "HTTPS" {
		t.Errorf("node agent probe not over HTTPS")
	}
	plain := render(t, "--set", "monitoring.enabled=true", "--set", "metricsSecure=false")
	if ep := get(find(plain, "ServiceMonitor", ""), "spec", "endpoints", "0"); get(ep, "scheme") != nil || get(ep, "authorization") != nil {
		t.Errorf("metricsSecure=false still scrapes with auth: %v", ep)
	}
	if n := count(objs, "PodMonitor"); n != 2 {
		t.Fatalf("want 2 PodMonitors, got %d", n)
	}
	sealer := find(objs, "PodMonitor", "sf-sealfleet-sealer")
	if !reflect.DeepEqual(get(sealer, "spec", "selector", "matchLabels"), obj{"app.kubernetes.io/name": "sealfleet", "app.kubernetes.io/component": "sealer"}) {
		t.Errorf("sealer PodMonitor selector %v", get(sealer, "spec", "selector"))
	}
	if !reflect.DeepEqual(get(sealer, "spec", "namespaceSelector", "matchNames"), []any{"sealfleet-system"}) { // where sealer pods run
		t.Errorf("sealer PodMonitor namespaces %v", get(sealer, "spec", "namespaceSelector"))
	}
	if get(sealer, "spec", "podMetricsEndpoints", "0", "port") != "metrics" {
		t.Errorf("sealer PodMonitor port %v", get(sealer, "spec", "podMetricsEndpoints"))
	}
	agent := find(objs, "PodMonitor", "sf-sealfleet-node-agent")
	rl, _ := json.Marshal(get(agent, "spec", "podMetricsEndpoints", "0", "relabelings"))
	if !strings.Contains(string(rl), `"__meta_kubernetes_pod_node_name"`) || !strings.Contains(string(rl), `"sealfleet-node-agent"`) {
		t.Errorf("agent PodMonitor relabelings %s", rl)
	}

	pr := find(objs, "PrometheusRule", "")
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	alerts := map[string]obj{}
	for _, g := range mustGet(t, pr, "spec", "groups").([]any) {
		for _, r := range g.(obj)["rules"].([]any) {
			if a, ok := r.(obj)["alert"].(string); ok {
				alerts[a] = r.(obj)
			}
		}
	}
	for _, name := range []string{"SealfleetHasherUtilisationLow", "SealfleetCCXHasherUtilisationLow", "SealfleetPC1Stalled",
		"SealfleetBatchStuckInPhase", "SealfleetNoCapacity", "SealfleetBatchesUnschedulable", "SealfleetSlotsExhausted",
		"SealfleetReleaseFailures", "SealfleetSectorFailures", "SealfleetNodeAgentDown", "SealfleetNodeAgentScanErrors", "SealfleetHugepagesShort",
		"SealfleetLayerDeviceNotReady", "SealfleetOperatorDown", "SealfleetReconcileErrors"} {
		a, ok := alerts[name]
		if !ok {
			t.Errorf("alert %s missing", name)
			continue
		}
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if get(a, "annotations", k) == nil {
				t.Errorf("alert %s has no %s", name, k)
			}
		}
		if !strings.HasSuffix(get(a, "annotations", "runbook_url").(string), "docs/monitoring.md#"+strings.ToLower(name)) {
			t.Errorf("alert %s runbook %v", name, get(a, "annotations", "runbook_url"))
		}
		if get(a, "labels", "severity") == nil {
			t.Errorf("alert %s has no severity", name)
		}
	}
	if len(alerts) != 17 {
		t.Errorf("want 17 alerts, got %d", len(alerts))
	}

	cm := find(objs, "ConfigMap", "sf-sealfleet-dashboard")
	if cm == nil || get(cm, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Fatalf("dashboard ConfigMap %v", cm)
	}
	var dash obj
	if err := json.Unmarshal([]byte(get(cm, "data", "sealfleet-fleet.json").(string)), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	titles := []string{}
	for _, p := range dash["panels"].([]any) {
		titles = append(titles, p.(obj)["title"].(string))
	}
	for _, want := range []string{"Batches by phase", "PC1 rate per node (sector-labels/s)", "Hasher utilisation per node and CCX", "Layer slots used per node"} {
		if !hasArg(titles, want) {
			t.Errorf("dashboard lacks panel %q (has %v)", want, titles)
		}
	}
}

// Docs name every alert with a heading the runbook links point at.
func TestDocsHaveARunbookPerAlert(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(root, "charts", "sealfleet", "files", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1) {
		if !regexp.MustCompile(`(?m)^#+ ` + m[1] + `\s*$`).Match(doc) {
			t.Errorf("docs/monitoring.md has no heading %q (runbook of the alert)", m[1])
		}
	}
}

func TestOverrides(t *testing.T) {
	objs := render(t,
		"--set", "image.repository=registry.example/sf/operator", "--set", "image.tag=v1.2.3",
		"--set", "sealerImage.repository=registry.example/sf/sealer", "--set", "sealerImage.tag=v9",
		"--set", "sealerImage.pullPolicy=Always",
		"--set", "nodeAgent.nodeSelector.sealfleet\\.io/sealer=null", "--set", "nodeAgent.nodeSelector.pool=sealers",
		"--set", "operator.sealerHostNetwork=true", "--set", "nodeAgent.hostNetwork=true",
		"--set", "operator.leaderElect=false", "--set", "crds.install=false")
	dep := find(objs, "Deployment", "")
	c := container(t, dep)
	if c["image"] != "registry.example/sf/operator:v1.2.3" {
		t.Errorf("operator image %v", c["image"])
	}
	args := strs(c["args"])
	for _, want := range []string{"--sealer-image=registry.example/sf/sealer:v9", "--scrub-image=registry.example/sf/operator:v1.2.3",
		"--image-pull-policy=Always", "--sealer-host-network=true", "--leader-elect=false"} {
		if !hasArg(args, want) {
			t.Errorf("operator args %v lack %s", args, want)
		}
	}
	if find(objs, "Role", "sf-sealfleet-leader-election") != nil {
		t.Errorf("leader election Role rendered with leaderElect=false")
	}
	if n := count(objs, "CustomResourceDefinition"); n != 0 {
		t.Errorf("crds.install=false still renders %d CRDs", n)
	}
	ds := find(objs, "DaemonSet", "")
	if container(t, ds)["image"] != "registry.example/sf/operator:v1.2.3" {
		t.Errorf("agent image %v", container(t, ds)["image"])
	}
	ps := ds["spec"].(obj)["template"].(obj)["spec"].(obj)
	if !reflect.DeepEqual(ps["nodeSelector"], obj{"pool": "sealers"}) {
		t.Errorf("agent nodeSelector %v", ps["nodeSelector"])
	}
	if ps["hostNetwork"] != true || ps["dnsPolicy"] != "ClusterFirstWithHostNet" {
		t.Errorf("agent hostNetwork %v dnsPolicy %v", ps["hostNetwork"], ps["dnsPolicy"])
	}

	// Adding a key keeps the opt-in label (Helm merges maps).
	objs = render(t, "--set", "nodeAgent.nodeSelector.pool=sealers", "--set", "nodeAgent.enabled=true")
	ps = find(objs, "DaemonSet", "")["spec"].(obj)["template"].(obj)["spec"].(obj)
	if !reflect.DeepEqual(ps["nodeSelector"], obj{"pool": "sealers", "sealfleet.io/sealer": "true"}) {
		t.Errorf("agent nodeSelector %v", ps["nodeSelector"])
	}

	objs = render(t, "--set", "nodeAgent.enabled=false", "--set", "batchNamespace.create=false")
	if find(objs, "DaemonSet", "") != nil || find(objs, "ClusterRole", "sf-sealfleet-node-agent") != nil {
		t.Errorf("nodeAgent.enabled=false still renders the agent")
	}
	if find(objs, "Namespace", "") != nil {
		t.Errorf("batchNamespace.create=false still renders the namespace")
	}

	// Digests pin every image, pull secrets reach every pod (sealer and scrub pods through
	// the operator's flag).
	const d1, d2 = "sha256:1111111111111111111111111111111111111111111111111111111111111111", "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	objs = render(t, "--set", "image.repository=registry.example/sf/operator", "--set", "image.digest="+d1,
		"--set", "sealerImage.repository=registry.example/sf/sealer", "--set", "sealerImage.digest="+d2,
		"--set", "imagePullSecrets[0].name=reg-a", "--set", "imagePullSecrets[1].name=reg-b")
	dep = find(objs, "Deployment", "")
	c = container(t, dep)
	if c["image"] != "registry.example/sf/operator@"+d1 || container(t, find(objs, "DaemonSet", ""))["image"] != "registry.example/sf/operator@"+d1 {
		t.Errorf("operator/agent image not pinned: %v", c["image"])
	}
	args = strs(c["args"])
	for _, want := range []string{"--sealer-image=registry.example/sf/sealer@" + d2, "--scrub-image=registry.example/sf/operator@" + d1,
		"--image-pull-secrets=reg-a,reg-b"} {
		if !hasArg(args, want) {
			t.Errorf("operator args %v lack %s", args, want)
		}
	}
	if got := get(dep, "spec", "template", "spec", "imagePullSecrets"); !reflect.DeepEqual(got, []any{obj{"name": "reg-a"}, obj{"name": "reg-b"}}) {
		t.Errorf("operator pull secrets %v", got)
	}
}

func TestMonitoringValues(t *testing.T) {
	objs := render(t, "--set", "monitoring.enabled=true",
		"--set", "monitoring.rules.hasherUtilisation.nodeThreshold=0.5",
		"--set", "monitoring.rules.hasherUtilisation.forMinutes=30",
		"--set", "monitoring.rules.alertLabels.team=storage",
		"--set", "monitoring.rules.alertLabels.severity=page",
		"--set", "monitoring.rules.stuckInPhase.limitsMinutes.PC1.32GiB.base=300",
		"--set", "monitoring.podMonitor.sealer.namespaces={*}",
		"--set", "monitoring.dashboard.enabled=false")
	if find(objs, "ConfigMap", "") != nil {
		t.Errorf("dashboard.enabled=false still renders it")
	}
	sealer := find(objs, "PodMonitor", "sf-sealfleet-sealer")
	if get(sealer, "spec", "namespaceSelector", "any") != true {
		t.Errorf("namespaces [*] should select any namespace: %v", get(sealer, "spec", "namespaceSelector"))
	}
	pr := find(objs, "PrometheusRule", "")
	var hasher, limit obj
	for _, g := range pr["spec"].(obj)["groups"].([]any) {
		for _, r := range g.(obj)["rules"].([]any) {
			r := r.(obj)
			if r["alert"] == "SealfleetHasherUtilisationLow" {
				hasher = r
			}
			if r["record"] == "sealfleet:batch_phase_limit_seconds" && reflect.DeepEqual(r["labels"], obj{"phase": "PC1", "sector_size": "32GiB", "sectors": "32"}) {
				limit = r
			}
		}
	}
	if !strings.Contains(hasher["expr"].(string), "< 0.5") || hasher["for"] != "30m" {
		t.Errorf("thresholds not applied: expr %q for %v", hasher["expr"], hasher["for"])
	}
	if !reflect.DeepEqual(hasher["labels"], obj{"severity": "warning", "team": "storage"}) {
		t.Errorf("alert labels %v (alertLabels add labels and never replace an alert's own)", hasher["labels"])
	}
	if limit == nil || limit["expr"] != "vector(18000)" {
		t.Errorf("PC1 32GiB limit %v", limit)
	}
}

func TestSchemaRejectsBadValues(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"sealerImage.digest=latest", "digest"},
		{"operator.watchNamespaces={team-a}", "leaves out the chart's batch namespace sealfleet-batches"},
		{"operator.watchNamespaces={sealfleet-batches},operator.parentCacheNamespace=builders", "leaves out the parent-cache builders' namespace builders"},
		{"operator.watchNamespaces={sealfleet-batches},operator.scrubNamespace=scrubs", "leaves out the scrub pods' namespace scrubs"},
		{"operator.podRightsInBatchNamespaces=true,operator.sealerNamespace=sealers", "operator.sealerNamespace \"sealers\" and operator.podRightsInBatchNamespaces=true contradict"},
		{"operator.podRightsInBatchNamespaces=yes", "podRightsInBatchNamespaces"},
		{"sealerImage.pc2Engines={cpu,gpu}", "pc2Engines"}, // engines come from the image (sealer capabilities), not a value
		{"operator.sealerHostNetwork=maybe", "sealerHostNetwork"},
		{"operator.sealerHostNetwrk=true", "sealerHostNetwrk"},
		{"operator.releaseTimeout=ten minutes", "releaseTimeout"},
		{"operator.sealerMetricsPort=70000", "sealerMetricsPort"},
		{"batchNamespace.podSecurity=open", "podSecurity"},
		{"batchNamespace.name=Bad_Name", "name"},
		{"monitoring.enabled=yes", "enabled"},
		{"monitoring.rules.hasherUtilisation.nodeThreshold=1.5", "nodeThreshold"},
		{"monitoring.rules.stuckInPhase.limitsMinutes.PC1.16GiB.base=10", "16GiB"},
		{"monitoring.rules.pc1Stalled.graceMinutes=5", "graceMinutes"},
	} {
		args := []string{"--set", tc.set}
		if strings.HasPrefix(tc.set, "monitoring.rules") {
			args = append(args, "--set", "monitoring.enabled=true")
		}
		_, stderr, err := template(t, args...)
		if err == nil {
			t.Errorf("--set %s: accepted", tc.set)
			continue
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("--set %s: message does not name %q:\n%s", tc.set, tc.want, stderr)
		}
	}
}
