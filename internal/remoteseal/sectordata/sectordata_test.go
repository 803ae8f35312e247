package sectordata_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sealfleet/sealfleet/internal/remoteseal/lotusreceive"
	"github.com/sealfleet/sealfleet/internal/remoteseal/sectordata"
)

type node struct {
	t      *testing.T
	root   string
	signer sectordata.Signer
	url    string
	now    time.Time
	mu     sync.Mutex
	served map[string]int64
}

func newNode(t *testing.T) *node {
	n := &node{t: t, root: t.TempDir(), signer: sectordata.Signer{Key: bytes.Repeat([]byte{0x5a}, 32)}, now: time.Unix(1_800_000_000, 0), served: map[string]int64{}}
	s := &sectordata.Server{Signer: n.signer, Root: n.root, Now: func() time.Time { return n.now },
		Served: func(kind string, b int64) { n.mu.Lock(); n.served[kind] += b; n.mu.Unlock() }}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	n.url = ts.URL
	return n
}

func (n *node) write(rel string, data []byte) {
	n.t.Helper()
	p := filepath.Join(n.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) signed(kind, rel string, ttl time.Duration) string {
	n.t.Helper()
	u, err := n.signer.URL(n.url, kind, rel, n.now.Add(ttl))
	if err != nil {
		n.t.Fatal(err)
	}
	return u
}

func get(t *testing.T, u, rng string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestSealedServesRangesUnderASignature: a signed URL serves the replica whole, from an
// offset (a resumed download), and 416 past its end; a changed path, a foreign key or an
// expired URL is refused; the bytes are counted.
func TestSealedServesRangesUnderASignature(t *testing.T) {
	n := newNode(t)
	replica := make([]byte, 3<<20)
	for i := range replica {
		replica[i] = byte(i*31 + i>>8)
	}
	n.write("ns/b/sealed/s-t01000-4", replica)
	u := n.signed(sectordata.KindSealed, "ns/b/sealed/s-t01000-4", time.Hour)
	resp, body := get(t, u, "")
	if resp.StatusCode != 200 || !bytes.Equal(body, replica) || resp.Header.Get("Accept-Ranges") != "bytes" || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("whole: %d, %d bytes, %v", resp.StatusCode, len(body), resp.Header)
	}
	half := len(replica) / 2
	resp, body = get(t, u, fmt.Sprintf("bytes=%d-", half))
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, replica[half:]) {
		t.Errorf("resumed: %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := get(t, u, fmt.Sprintf("bytes=%d-", len(replica))); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("past the end: %d", resp.StatusCode)
	}
	if got := n.served[sectordata.KindSealed]; got != int64(len(replica)+len(replica)-half) {
		t.Errorf("bytes served %d, want %d", got, len(replica)+len(replica)-half)
	}

	tampered := strings.Replace(u, "s-t01000-4", "s-t01000-5", 1)
	other, _ := sectordata.Signer{Key: bytes.Repeat([]byte{1}, 32)}.URL(n.url, sectordata.KindSealed, "ns/b/sealed/s-t01000-4", n.now.Add(time.Hour))
	asCache := strings.Replace(u, sectordata.RoutePrefix+sectordata.KindSealed, sectordata.RoutePrefix+sectordata.KindCache, 1)
	for name, bad := range map[string]string{"another path": tampered, "another key": other, "another kind": asCache} {
		if resp, body := get(t, bad, ""); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "bad signature") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	n.now = n.now.Add(2 * time.Hour)
	if resp, body := get(t, u, ""); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "expired") {
		t.Errorf("expired: %d %s", resp.StatusCode, body)
	}
	n.now = n.now.Add(-2 * time.Hour)
	if resp, _ := get(t, n.signed(sectordata.KindSealed, "ns/b/sealed/none", time.Hour), ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("missing file: %d", resp.StatusCode)
	}
}

// TestCommit1FollowsAPost: the C1 output is served to the client's POST that the provider
// redirected with 307, and only under a commit1 signature.
func TestCommit1FollowsAPost(t *testing.T) {
	n := newNode(t)
	n.write("ns/b/cache/s-t01000-4/commit-phase1-output", []byte(`{"c1":"bytes"}`))
	u := n.signed(sectordata.KindCommit1, "ns/b/cache/s-t01000-4/commit-phase1-output", time.Hour)
	resp, err := http.Post(u, "application/json", strings.NewReader(`{"seed_value":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"c1":"bytes"}` {
		t.Errorf("POST commit1: %d %s", resp.StatusCode, body)
	}
	asSealed := strings.Replace(u, sectordata.RoutePrefix+sectordata.KindCommit1, sectordata.RoutePrefix+sectordata.KindSealed, 1)
	if resp, _ := get(t, asSealed, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a commit1 signature served as sealed: %d", resp.StatusCode)
	}
}

// TestPathsStayBeneathTheRoot: a signature does not make ".." or a symlink out of the root
// servable.
func TestPathsStayBeneathTheRoot(t *testing.T) {
	n := newNode(t)
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(n.root, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.signer.URL(n.url, sectordata.KindSealed, "../secret", n.now.Add(time.Hour)); err == nil {
		t.Error("signed a path out of the root")
	}
	if resp, body := get(t, n.signed(sectordata.KindSealed, "link", time.Hour), ""); resp.StatusCode == 200 || strings.Contains(string(body), "host secret") {
		t.Errorf("symlink out of the root served: %d %s", resp.StatusCode, body)
	}
	q := url.Values{"path": {"/etc/passwd"}, "exp": {"9999999999"}, "sig": {"00"}}
	if resp, _ := get(t, n.url+sectordata.RoutePrefix+"sealed?"+q.Encode(), ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("unsigned absolute path: %d", resp.StatusCode)
	}
}

// TestCacheTarHoldsWhatCurioExtracts: the tar has exactly p_aux, t_aux and the tree-r-last
// files, bare names in name order, no directories, no layers, tree-c, tree-d or synthetic
// proofs; an incomplete cache is a 404 before any byte of tar.
func TestCacheTarHoldsWhatCurioExtracts(t *testing.T) {
	n := newNode(t)
	dir := "ns/b/cache/s-t01000-4"
	files := map[string][]byte{
		"p_aux": bytes.Repeat([]byte{1}, 64), "t_aux": []byte("t_aux contents"),
		"sc-02-data-tree-r-last-0.dat": bytes.Repeat([]byte{2}, 4096), "sc-02-data-tree-r-last-1.dat": bytes.Repeat([]byte{3}, 4096),
		"sc-02-data-tree-r-last-10.dat": {4},
		"sc-02-data-layer-1.dat":        bytes.Repeat([]byte{9}, 8192), "sc-02-data-tree-c-0.dat": {9}, "sc-02-data-tree-d.dat": {9},
		"syn-porep-vanilla-proofs.dat": {9}, "commit-phase1-output": {9},
	}
	for name, data := range files {
		n.write(dir+"/"+name, data)
	}
	if err := os.MkdirAll(filepath.Join(n.root, dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, n.signed(sectordata.KindCache, dir, time.Hour), "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("cache: %d %s", resp.StatusCode, body)
	}
	tr := tar.NewReader(bytes.NewReader(body))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		limit, ok := sectordata.CacheFileLimits[h.Name]
		if !ok || h.Typeflag != tar.TypeReg || h.Size > limit || !bytes.Equal(data, files[h.Name]) {
			t.Errorf("member %q (type %c, %d bytes) is not what Curio's client extracts", h.Name, h.Typeflag, h.Size)
		}
		names = append(names, h.Name)
	}
	want := []string{"p_aux", "sc-02-data-tree-r-last-0.dat", "sc-02-data-tree-r-last-1.dat", "sc-02-data-tree-r-last-10.dat", "t_aux"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("members %v, want %v", names, want)
	}
	if n.served[sectordata.KindCache] != int64(len(body)) {
		t.Errorf("cache bytes counted %d, sent %d", n.served[sectordata.KindCache], len(body))
	}

	n.write("ns/b/cache/partial/p_aux", bytes.Repeat([]byte{1}, 64))
	if resp, body := get(t, n.signed(sectordata.KindCache, "ns/b/cache/partial", time.Hour), ""); resp.StatusCode != http.StatusNotFound ||
		!strings.Contains(string(body), "t_aux") || !strings.Contains(string(body), "tree-r-last") {
		t.Errorf("incomplete cache: %d %s", resp.StatusCode, body)
	}
	n.write("ns/b/cache/big/p_aux", bytes.Repeat([]byte{1}, 65))
	if resp, body := get(t, n.signed(sectordata.KindCache, "ns/b/cache/big", time.Hour), ""); resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "p_aux is 65 bytes") {
		t.Errorf("oversized p_aux: %d %s", resp.StatusCode, body)
	}
}

// TestUnsealedCCIsZerosThenLotusTrailer: the CC unsealed file signed for a replica is as many
// zeros as the replica's bytes, then lotus' trailer; Range works across the boundary; a URL
// signed for the replica itself does not open it.
func TestUnsealedCCIsZerosThenLotusTrailer(t *testing.T) {
	n := newNode(t)
	replica := bytes.Repeat([]byte{0xab}, 2048)
	n.write("ns/b/sealed/s-t01000-7", replica)
	u := n.signed(sectordata.KindUnsealedCC, "ns/b/sealed/s-t01000-7", time.Hour)
	tail, err := lotusreceive.UnsealedCCTrailer(2048)
	if err != nil {
		t.Fatal(err)
	}
	want := append(make([]byte, 2048), tail...)
	resp, body := get(t, u, "")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("%s: %d bytes, want %d", resp.Status, len(body), len(want))
	}
	resp, body = get(t, u, "bytes=2040-")
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, want[2040:]) {
		t.Fatalf("range: %s %x", resp.Status, body)
	}
	if resp, _ := get(t, strings.Replace(n.signed(sectordata.KindSealed, "ns/b/sealed/s-t01000-7", time.Hour), "/sealed?", "/unsealed-cc?", 1), ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a replica's URL opened its unsealed file: %s", resp.Status)
	}
	if resp, _ := get(t, n.signed(sectordata.KindUnsealedCC, "ns/b/sealed/s-t01000-8", time.Hour), ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("missing replica: %s", resp.Status)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.served[sectordata.KindUnsealedCC] != int64(len(want)+len(want)-2040) {
		t.Errorf("served %d bytes", n.served[sectordata.KindUnsealedCC])
	}
}
