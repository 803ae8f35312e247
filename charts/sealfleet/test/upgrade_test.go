package chart_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

// upgradeFrom is the commit whose chart the upgrade test installs first: the chart as the
// last release before the GitOps Secrets, the restricted batch namespace and the remote-seal
// Service port changed it.
const upgradeFrom = "a26172a"

// TestUpgradeRollbackUninstall runs docs/upgrade.md's and docs/uninstall.md's Helm steps
// against a real API server (envtest: no nodes, so no pod runs): the chart of upgradeFrom is
// installed with the remote-seal provider on, a SealBatch is stored, the chart from this
// checkout is upgraded over it, rolled back, and uninstalled. The sector-data key and CA stay
// byte for byte through all of it, the CRDs follow the chart, and what uninstall.md says
// stays behind does.
func TestUpgradeRollbackUninstall(t *testing.T) {
	h := helmBin(t)
	old := filepath.Join(t.TempDir(), "old")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", upgradeFrom, "charts/sealfleet")
	untar := exec.Command("tar", "-x", "-C", old)
	var errb bytes.Buffer
	archive.Stderr = &errb
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("the pinned chart (commit %s) is not in this clone (%v: %s); the upgrade test needs the repository's history", upgradeFrom, err, errb.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatal(err)
	}
	oldChart := filepath.Join(old, "charts", "sealfleet")

	env := testenv.Start(t)
	ctx := context.Background()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	values := []string{"--set", "remoteSeal.enabled=true", "--set", "remoteSeal.insecureHTTP=true"}
	helmDo := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(h, append([]string{"--kubeconfig", kubeconfig, "-n", "sealfleet-system"}, args...)...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, stderr.String())
		}
		return out.String()
	}
	secretData := func(name string) map[string][]byte {
		t.Helper()
		var s corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "sealfleet-system", Name: name}, &s); err != nil {
			t.Fatalf("Secret %s: %v", name, err)
		}
		return s.Data
	}
	crdKept := func() bool {
		t.Helper()
		crd := crdObject("sealbatches.sealfleet.io")
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			t.Fatalf("SealBatch CRD: %v", err)
		}
		return crd.GetAnnotations()["helm.sh/resource-policy"] == "keep"
	}
	batchNSLevel := func() string {
		t.Helper()
		var ns corev1.Namespace
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "sealfleet-batches"}, &ns); err != nil {
			t.Fatal(err)
		}
		return ns.Labels["pod-security.kubernetes.io/enforce"]
	}

	// envtest installs the CRDs itself; the chart installs them here, as on a fresh cluster.
	for _, name := range []string{"sealbatches", "sealernodes", "sealorders"} {
		crd := crdObject(name + ".sealfleet.io")
		if err := env.Client.Delete(ctx, crd); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not deleted after a minute", crd.GetName())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	helmDo(append([]string{"install", "sealfleet", oldChart, "--create-namespace"}, values...)...)
	waitForCRDs(t, env.Client)
	key, ca := secretData("sealfleet-sector-data-key"), secretData("sealfleet-sector-data-ca")
	batch := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Namespace: "sealfleet-batches", Name: "kept"}, Spec: sealv1.SealBatchSpec{
		SectorSize: sealv1.SectorSize8MiB, MinerID: "f01000",
		Sectors: []sealv1.SectorSpec{{Number: 1, Ticket: strings.Repeat("ab", 32)}},
	}}
	if err := env.Client.Create(ctx, batch); err != nil {
		t.Fatal(err)
	}

	// Upgrade as docs/upgrade.md says: the new chart's defaults, the release's own values again.
	helmDo(append([]string{"upgrade", "sealfleet", filepath.Join(root, "charts", "sealfleet")}, values...)...)
	if !bytes.Equal(secretData("sealfleet-sector-data-key")["key"], key["key"]) ||
		!bytes.Equal(secretData("sealfleet-sector-data-ca")["tls.crt"], ca["tls.crt"]) || !bytes.Equal(secretData("sealfleet-sector-data-ca")["tls.key"], ca["tls.key"]) {
		t.Error("the upgrade replaced the sector-data key or CA: every partner's URLs and trust would break")
	}
	if !crdKept() {
		t.Error("after the upgrade the SealBatch CRD lacks helm.sh/resource-policy: keep")
	}
	if got := batchNSLevel(); got != "restricted" {
		t.Errorf("after the upgrade the batch namespace is %q, want restricted", got)
	}
	var kept sealv1.SealBatch
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(batch), &kept); err != nil {
		t.Errorf("the SealBatch did not survive the upgrade: %v", err)
	}

	// Back to the pinned release (docs/upgrade.md, "Going back").
	helmDo("rollback", "sealfleet", "1")
	if !bytes.Equal(secretData("sealfleet-sector-data-key")["key"], key["key"]) || !bytes.Equal(secretData("sealfleet-sector-data-ca")["tls.crt"], ca["tls.crt"]) {
		t.Error("the rollback replaced the sector-data key or CA")
	}
	if got := batchNSLevel(); got != "privileged" {
		t.Errorf("after the rollback the batch namespace is %q, want the pinned chart's privileged", got)
	}

	// Uninstall (docs/uninstall.md): CRDs with every SealBatch, the batch namespace and the
	// sector-data Secrets stay; the operator's own objects go.
	helmDo("uninstall", "sealfleet")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(batch), &kept); err != nil {
		t.Errorf("uninstall took the SealBatches (or their CRD) with it: %v", err)
	}
	if batchNSLevel() == "" {
		t.Error("uninstall removed the batch namespace's labels or the namespace")
	}
	secretData("sealfleet-sector-data-key")
	secretData("sealfleet-sector-data-ca")
	crdKept()
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "sealfleet-system", Name: "sealfleet-operator"}, &dep); err == nil {
		t.Error("the operator Deployment is still there after uninstall")
	}
}

// waitForCRDs waits until the API server serves SealBatches again (a CRD just created is
// established within a second or two).
func waitForCRDs(t *testing.T, c client.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var list sealv1.SealBatchList
		err := c.List(context.Background(), &list)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SealBatches not served a minute after the chart installed their CRD: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// crdObject is a CustomResourceDefinition by name, unstructured (the test's scheme has no
// apiextensions types).
func crdObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	u.SetName(name)
	return u
}
