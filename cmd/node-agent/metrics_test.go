package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sealfleet/sealfleet/internal/nodeagent"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

// TestSecureMetrics serves the agent's metrics on a real API server's authentication and
// authorization (envtest): /healthz is open, /metrics answers only a token allowed to GET it.
func TestSecureMetrics(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := nodeagent.NewMetrics("n1")
	srv, addr, err := metricsServer(ctx, env.Config, m, "127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	cs := kubernetes.NewForConfigOrDie(env.Config)
	token := func(sa string) string {
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	reader, stranger := token("reader"), token("stranger")
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz without a token: %d", code)
	}
	if code, _ := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401", code)
	}
	if code, _ := get("/metrics", stranger); code != http.StatusForbidden {
		t.Errorf("/metrics with a token not allowed to read it: %d, want 403", code)
	}
	as := []nodeagent.Assignment{{CPU: 0, Role: "hasher", Batch: "ns/b"}}
	m.ObserveCPUs(map[int]nodeagent.CPUTimes{0: {Busy: 1, Idle: 1}}, as, nil)
	m.ObserveCPUs(map[int]nodeagent.CPUTimes{0: {Busy: 2, Idle: 2}}, as, nil)
	if code, body := get("/metrics", reader); code != http.StatusOK || !strings.Contains(body, "sealfleet_node_cpu_busy_ratio") {
		t.Errorf("/metrics with the reader's token: %d\n%s", code, body)
	}
}
