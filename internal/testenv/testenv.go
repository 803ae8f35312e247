// Package testenv starts a real kube-apiserver + etcd (controller-runtime envtest) with the
// sealfleet CRDs installed, for tests that need an API server.
package testenv

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/kube"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	env    *envtest.Environment
}

// RepoRoot is the repository root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start starts the control plane (skipping the test when KUBEBUILDER_ASSETS is unset, which
// `make test` always sets) and stops it when the test ends.
func Start(t testing.TB) *Env {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: run through `make test` (or `make envtest` and export KUBEBUILDER_ASSETS=bin/envtest)")
	}
	SetLogger()
	e := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := e.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Logf("stopping envtest: %v", err)
		}
	})
	s := kube.Scheme()
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: s, env: e}
}

// GVK of the API kinds, for unstructured tests.
var (
	SealBatchGVK  = schema.GroupVersionKind{Group: sealv1.GroupVersion.Group, Version: sealv1.GroupVersion.Version, Kind: "SealBatch"}
	SealerNodeGVK = schema.GroupVersionKind{Group: sealv1.GroupVersion.Group, Version: sealv1.GroupVersion.Version, Kind: "SealerNode"}
)

// SetLogger gives controller-runtime a logger for tests (without one it prints a warning and
// a stack trace): silent, or development logs on stderr with SEALFLEET_TEST_LOG=1.
func SetLogger() {
	if os.Getenv("SEALFLEET_TEST_LOG") != "" {
		log.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
		return
	}
	log.SetLogger(zap.New(zap.WriteTo(io.Discard)))
}
