package chart_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBatchNamespaceIsPrivilegedOnlyWhereOperatorPodsRun: with the defaults no pod of the
// operator's runs in the batch namespace, so tenants there get restricted Pod Security; it is
// privileged only where the operator's pods do run, and an explicit level wins.
func TestBatchNamespaceIsPrivilegedOnlyWhereOperatorPodsRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"defaults", nil, "restricted"},
		{"legacy pods in batch namespaces", []string{"operator.podRightsInBatchNamespaces=true"}, "privileged"},
		{"sealer namespace is the batch namespace", []string{"operator.sealerNamespace=sealfleet-batches"}, "privileged"},
		{"scrubs in the batch namespace", []string{"operator.scrubNamespace=sealfleet-batches"}, "privileged"},
		{"node pods default to the first watched namespace", []string{"operator.watchNamespaces={sealfleet-batches}"}, "privileged"},
		{"another watched namespace first", []string{"operator.watchNamespaces={team-a,sealfleet-batches}"}, "restricted"},
		{"explicit level", []string{"batchNamespace.podSecurity=baseline"}, "baseline"},
	} {
		var args []string
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		ns := find(render(t, args...), "Namespace", "sealfleet-batches")
		for _, mode := range []string{"enforce", "audit", "warn"} {
			if v := get(ns, "metadata", "labels", "pod-security.kubernetes.io/"+mode); v != tc.want {
				t.Errorf("%s: batch namespace %s = %v, want %s", tc.name, mode, v, tc.want)
			}
		}
	}
}

// notes renders NOTES.txt, which `helm template` leaves out: a copy of the chart carries it as
// a named template that a ConfigMap prints.
func notes(t *testing.T, set ...string) string {
	t.Helper()
	src := filepath.Join(root, "charts", "sealfleet")
	dst := filepath.Join(t.TempDir(), "sealfleet")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(src, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dst, "templates", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("_notes-under-test.tpl", `{{- define "notes-under-test" -}}`+"\n"+string(text)+"\n{{- end }}\n")
	write("notes-under-test.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-under-test\ndata:\n  notes: {{ include \"notes-under-test\" . | toJson }}\n")
	args := []string{"template", "sf", dst, "-n", "sealfleet-system", "--kube-version", "1.32.0", "--show-only", "templates/notes-under-test.yaml"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, stderr, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, stderr)
	}
	return get(parse(t, out)[0], "data", "notes").(string)
}

// TestNotesNameTheNamespacesPodsRunIn: NOTES.txt prints the namespaces the operator's pods
// really run in (the helpers' choice, not the release namespace), and the batch namespace's
// Pod Security level.
func TestNotesNameTheNamespacesPodsRunIn(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want []string
	}{
		{nil, []string{"Sealer and C1 pods run in sealfleet-system, scrub pods in sealfleet-system", "builders in sealfleet-system",
			"The batch namespace sealfleet-batches is labelled restricted."}},
		{[]string{"operator.watchNamespaces={team-a,sealfleet-batches}"}, []string{"Sealer and C1 pods run in team-a, scrub pods in team-a",
			"builders in team-a", "is labelled restricted."}},
		{[]string{"operator.sealerNamespace=sealers"}, []string{"Sealer and C1 pods run in sealers, scrub pods in sealfleet-system"}},
	} {
		got := notes(t, tc.set...)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("--set %v: NOTES lack %q:\n%s", tc.set, w, got)
			}
		}
	}
}

// TestSectorDataSecretsForGitOps: a tool that renders with `helm template` sees no cluster, so
// the chart's lookup-kept key and CA would be new on every sync. Named Secrets and a
// cert-manager CA render the same bytes every time; the chart's own are refused where they
// cannot work.
func TestSectorDataSecretsForGitOps(t *testing.T) {
	on := []string{"--set", "remoteSeal.enabled=true", "--set", "remoteSeal.tlsSecret=provider-tls"}
	mountedTLS := func(objs []obj) string {
		for _, v := range get(find(objs, "DaemonSet", ""), "spec", "template", "spec", "volumes").([]any) {
			if v.(obj)["name"] == "sector-data-tls" {
				return get(v, "secret", "secretName").(string)
			}
		}
		return ""
	}
	mountedKey := func(objs []obj) string {
		for _, v := range get(find(objs, "DaemonSet", ""), "spec", "template", "spec", "volumes").([]any) {
			if v.(obj)["name"] == "sector-data-key" {
				return get(v, "secret", "secretName").(string)
			}
		}
		return ""
	}
	// The chart's own: fresh random bytes on each render (what lookup protects on a cluster).
	a, _, errA := template(t, on...)
	b, _, errB := template(t, on...)
	if errA != nil || errB != nil || a == b {
		t.Fatalf("two renders of the chart-kept Secrets are identical or failed (%v, %v): this test would not see the difference", errA, errB)
	}

	named := append(on, "--set", "remoteSeal.sectorData.keySecret=partner-key", "--set", "remoteSeal.sectorData.tls.caSecretName=partner-ca")
	objs := render(t, named...)
	if find(objs, "Secret", "sf-sealfleet-sector-data-key") != nil || find(objs, "Secret", "sf-sealfleet-sector-data-ca") != nil {
		t.Error("named Secrets given, yet the chart renders its own")
	}
	if mountedKey(objs) != "partner-key" || mountedTLS(objs) != "partner-ca" ||
		!hasArg(strs(container(t, find(objs, "Deployment", "sf-sealfleet-operator"))["args"]), "--remote-seal-data-key-secret=partner-key") ||
		!hasArg(strs(container(t, find(objs, "DaemonSet", ""))["args"]), "--sector-data-tls-ca-dir=/etc/sealfleet/sector-data-tls") {
		t.Errorf("named Secrets: agents mount key %q, CA %q", mountedKey(objs), mountedTLS(objs))
	}

	cm := append(on, "--set", "remoteSeal.sectorData.keySecret=partner-key", "--set", "remoteSeal.sectorData.tls.mode=CertManager",
		"--api-versions", "cert-manager.io/v1/Certificate")
	first, stderr, err := template(t, cm...)
	if err != nil {
		t.Fatalf("mode CertManager: %v %s", err, stderr)
	}
	if again, _, _ := template(t, cm...); again != first {
		t.Error("mode CertManager renders different bytes on each sync")
	}
	objs = render(t, cm...)
	cert := find(objs, "Certificate", "sf-sealfleet-sector-data-ca")
	if cert == nil || get(cert, "spec", "isCA") != true || get(cert, "spec", "secretName") != mountedTLS(objs) ||
		get(cert, "spec", "privateKey", "rotationPolicy") != "Never" || find(objs, "Issuer", "sf-sealfleet-sector-data-selfsigned") == nil ||
		find(objs, "Secret", "sf-sealfleet-sector-data-ca") != nil {
		t.Errorf("mode CertManager: Certificate %v, agents mount %q", cert, mountedTLS(objs))
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(on, "--set", "remoteSeal.sectorData.tls.mode=CertManager"), "install cert-manager first"},
		{append(on, "--set", "remoteSeal.sectorData.tls.mode=CertManager", "--set", "remoteSeal.sectorData.tls.caSecretName=x",
			"--api-versions", "cert-manager.io/v1/Certificate"), "with mode CertManager the chart's Certificate writes the CA Secret"},
		{append(on, "--set", "remoteSeal.sectorData.keySecret=Bad_Name"), "keySecret"},
	} {
		if _, stderr, err := template(t, tc.args...); err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: err %v, stderr %s", tc.args, err, stderr)
		}
	}
}

// TestRuntimeClassForGPUs: one value puts sealer and C1 pods (through the operator's flag)
// and the node agent's pod, whose capabilities init container probes the GPUs, under the
// NVIDIA runtime's class; unset, neither names one.
func TestRuntimeClassForGPUs(t *testing.T) {
	podSpec := func(objs []obj) obj { return get(find(objs, "DaemonSet", ""), "spec", "template", "spec").(obj) }
	objs := render(t)
	if _, ok := podSpec(objs)["runtimeClassName"]; ok || hasArgPrefix(strs(container(t, find(objs, "Deployment", "sf-sealfleet-operator"))["args"]), "--sealer-runtime-class") {
		t.Error("a runtime class is set by default")
	}
	objs = render(t, "--set", "sealerImage.runtimeClassName=nvidia")
	if podSpec(objs)["runtimeClassName"] != "nvidia" || !hasArg(strs(container(t, find(objs, "Deployment", "sf-sealfleet-operator"))["args"]), "--sealer-runtime-class=nvidia") {
		t.Errorf("runtime class: agent %v", podSpec(objs)["runtimeClassName"])
	}
	objs = render(t, "--set", "sealerImage.runtimeClassName=nvidia", "--set", "nodeAgent.sealerCapabilities.enabled=false")
	if _, ok := podSpec(objs)["runtimeClassName"]; ok {
		t.Error("the agent runs under the GPU runtime without the capabilities probe")
	}
}

// hasArgPrefix reports whether an argument starts with prefix.
func hasArgPrefix(args []string, prefix string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}
