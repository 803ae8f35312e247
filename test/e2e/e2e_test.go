// Package e2e runs sealfleet end to end on the local cluster (hack/cluster.sh). The tests skip
// unless SEALFLEET_E2E=1, so a plain `go test ./...` passes without a cluster:
//
//	SEALFLEET_E2E=1 go test ./test/e2e -v -timeout 30m
//
// If the cluster is not running the suite starts it (control plane + simulated fleet; the real
// node too when root and SEALFLEET_E2E_NODE=1) and stops it afterwards; a cluster that was
// already running is used as it is and left running. The operator runs as a local process
// (hack/cluster.sh operator) so that it can be restarted mid-scenario and measured.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sealfleet/sealfleet/internal/kube"
	"github.com/sealfleet/sealfleet/internal/testenv"
)

var (
	repo       string
	clusterDir string
	k8s        client.Client
)

func TestMain(m *testing.M) {
	if os.Getenv("SEALFLEET_E2E") != "1" {
		fmt.Println("e2e: skipped (set SEALFLEET_E2E=1; see test/e2e/e2e_test.go)")
		os.Exit(0)
	}
	testenv.SetLogger()
	_, file, _, _ := runtime.Caller(0)
	repo = filepath.Join(filepath.Dir(file), "..", "..")
	clusterDir = os.Getenv("CLUSTER_DIR")
	if clusterDir == "" {
		clusterDir = filepath.Join(repo, "_out", "cluster")
	}
	started := false
	if out, _ := cluster("status"); !strings.Contains(out, "kube-apiserver running") {
		env := []string{"CLUSTER_NODE=0"}
		if os.Getenv("SEALFLEET_E2E_NODE") == "1" {
			env = []string{"CLUSTER_NODE=1"}
		}
		if out, err := clusterEnv(env, "up"); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: cluster up failed: %v\n%s", err, out)
			os.Exit(1)
		}
		started = true
	}
	code := func() int {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(clusterDir, "pki", "admin.kubeconfig"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		cfg.QPS, cfg.Burst = 200, 400
		if k8s, err = client.New(cfg, client.Options{Scheme: kube.Scheme()}); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		return m.Run()
	}()
	if started && os.Getenv("SEALFLEET_E2E_KEEP") != "1" {
		if out, err := cluster("down"); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: cluster down failed: %v\n%s", err, out)
			code = 1
		}
	}
	os.Exit(code)
}

func cluster(args ...string) (string, error) { return clusterEnv(nil, args...) }

func clusterEnv(env []string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repo, "hack", "cluster.sh"), args...)
	cmd.Env = append(append(os.Environ(), "CLUSTER_DIR="+clusterDir), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// operatorPID is the pid of the local operator process started by hack/cluster.sh operator.
func operatorPID(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(clusterDir, "run", "manager.pid"))
	if err != nil {
		t.Fatalf("operator pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// procUsage is a process's CPU seconds (user+system) and resident memory.
type procUsage struct {
	CPUSeconds float64
	RSSBytes   int64
}

func usage(pid int) (procUsage, error) {
	var u procUsage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command (which may contain spaces) start after the last ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	u.CPUSeconds = (utime + stime) / 100 // USER_HZ
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			u.RSSBytes = kb << 10
		}
	}
	return u, nil
}

// eventually polls fn until it returns true or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, fn func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ok, msg := fn(ctx)
		if ok {
			return
		}
		last = msg
		time.Sleep(time.Second)
	}
	t.Fatalf("%s: not done after %s: %s", what, timeout, last)
}
