// Package sectordata serves a sealed sector's bytes from the node that holds them, so that a
// 32 GiB replica never passes through the operator: the provider hands the client a URL signed
// for one file (or one cache directory) and a short time, and the node checks the signature
// and serves the file beneath its output root, with HTTP Range for resumable downloads. The
// cache is a tar of exactly the files Curio's client accepts from a finalized cache.
package sectordata

import (
	"archive/tar"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sealfleet/sealfleet/internal/remoteseal/lotusreceive"
)

// Kinds of payload a URL is signed for.
const (
	KindSealed = "sealed"
	KindCache  = "cache"
	// KindCommit1 is a sector's commit-phase1-output; it is also served to a POST (the
	// provider's commit1 answer redirects the client's POST here with 307).
	KindCommit1 = "commit1"
	// KindUnsealedCC is a CC sector's unsealed file in lotus' format, made on the fly: as many
	// zeros as the signed replica has bytes, then lotus' trailer (everything present). lotus'
	// SectorReceive wants one for every sector it takes.
	KindUnsealedCC = "unsealed-cc"
)

// RoutePrefix is where a node serves sector data.
const RoutePrefix = "/remoteseal/node/v0/"

// Signer signs and checks URLs with a key shared by the provider and the nodes.
type Signer struct {
	Key []byte
}

func (s Signer) mac(kind, rel string, exp int64) []byte {
	m := hmac.New(sha256.New, s.Key)
	fmt.Fprintf(m, "%s\n%s\n%d", kind, rel, exp)
	return m.Sum(nil)
}

// URL is base (the node's address, e.g. https://10.0.0.5:9470) + a route for kind that
// serves rel (a path under the node's output root) until exp.
func (s Signer) URL(base, kind, rel string, exp time.Time) (string, error) {
	q, err := s.Query(kind, rel, exp)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(base, "/") + RoutePrefix + kind + "?" + q.Encode(), nil
}

// Query is the signed query (path, exp, sig) granting kind on rel until exp, for a route of
// the caller's (Verify checks it).
func (s Signer) Query(kind, rel string, exp time.Time) (url.Values, error) {
	if len(s.Key) < 32 {
		return nil, errors.New("sector data signing key must be at least 32 bytes")
	}
	if err := checkRel(rel); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("path", rel)
	q.Set("exp", strconv.FormatInt(exp.Unix(), 10))
	q.Set("sig", hex.EncodeToString(s.mac(kind, rel, exp.Unix())))
	return q, nil
}

// Verify checks a request's signature for kind and its expiry; it returns the signed path.
func (s Signer) Verify(kind string, q url.Values, now time.Time) (string, error) {
	return s.verify(kind, q, now)
}

// verify checks a request's signature and expiry; it returns the signed relative path.
func (s Signer) verify(kind string, q url.Values, now time.Time) (string, error) {
	rel := q.Get("path")
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil {
		return "", errors.New("missing or malformed exp")
	}
	sig, err := hex.DecodeString(q.Get("sig"))
	if err != nil || !hmac.Equal(sig, s.mac(kind, rel, exp)) {
		return "", errors.New("bad signature")
	}
	if now.Unix() > exp {
		return "", errors.New("expired: ask the provider for the sector's URL again")
	}
	return rel, checkRel(rel)
}

// checkRel refuses paths that are absolute or climb out (the root also confines them).
func checkRel(rel string) error {
	if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("path %q must be relative and clean, beneath the output root", rel)
	}
	return nil
}

// CacheFileLimits are the files of a finalized cache that Curio's client extracts, with the
// largest size it accepts for each; any other entry fails its extraction.
var CacheFileLimits = func() map[string]int64 {
	m := map[string]int64{"p_aux": 64, "t_aux": 10240, "sc-02-data-tree-r-last.dat": 10_000_000, "snap-vproof.json": 20_000_000}
	for i := 0; i < 16; i++ {
		m[fmt.Sprintf("sc-02-data-tree-r-last-%d.dat", i)] = 10_000_000
	}
	return m
}()

// Server serves signed sector data beneath Root.
type Server struct {
	Signer Signer
	// Root is the output root the signed paths are relative to (opened with os.OpenRoot, so
	// neither ".." nor a symlink leaves it).
	Root string
	Now  func() time.Time
	// Served counts the bytes written per kind (for the node's metrics); may be nil.
	Served func(kind string, n int64)
}

// Handler serves GET RoutePrefix+"sealed" and "cache", and GET or POST "commit1".
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+RoutePrefix+KindSealed, s.file(KindSealed))
	mux.HandleFunc("GET "+RoutePrefix+KindCommit1, s.file(KindCommit1))
	mux.HandleFunc("POST "+RoutePrefix+KindCommit1, s.file(KindCommit1))
	mux.HandleFunc("GET "+RoutePrefix+KindCache, s.cache)
	mux.HandleFunc("GET "+RoutePrefix+KindUnsealedCC, s.unsealedCC)
	return mux
}

// unsealedCC serves, with Range support, the unsealed file of the CC sector whose replica is
// signed: lotusreceive.UnsealedCCTrailer after the replica's length of zeros.
func (s *Server) unsealedCC(w http.ResponseWriter, r *http.Request) {
	root, rel, ok := s.open(w, r, KindUnsealedCC)
	if !ok {
		return
	}
	defer root.Close()
	st, err := root.Stat(rel)
	if err != nil {
		notFound(w, err)
		return
	}
	if !st.Mode().IsRegular() {
		http.Error(w, "sector data not found in storage", http.StatusNotFound)
		return
	}
	tail, err := lotusreceive.UnsealedCCTrailer(uint64(st.Size()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	body := zerosThen{zeros: st.Size(), tail: tail}
	http.ServeContent(&countingWriter{ResponseWriter: w, kind: KindUnsealedCC, served: s.Served}, r, "", time.Time{},
		io.NewSectionReader(body, 0, body.zeros+int64(len(tail))))
}

// zerosThen reads as `zeros` zero bytes followed by tail.
type zerosThen struct {
	zeros int64
	tail  []byte
}

func (z zerosThen) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		at := off + int64(n)
		switch {
		case at < z.zeros:
			k := int(min(int64(len(p)-n), z.zeros-at))
			clear(p[n : n+k])
			n += k
		case at-z.zeros < int64(len(z.tail)):
			n += copy(p[n:], z.tail[at-z.zeros:])
		default:
			return n, io.EOF
		}
	}
	return n, nil
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) open(w http.ResponseWriter, r *http.Request, kind string) (*os.Root, string, bool) {
	rel, err := s.Signer.verify(kind, r.URL.Query(), s.now())
	if err != nil {
		http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
		return nil, "", false
	}
	root, err := os.OpenRoot(s.Root)
	if err != nil {
		http.Error(w, "sector data not available", http.StatusInternalServerError)
		return nil, "", false
	}
	return root, rel, true
}

// file serves one regular file with Range support.
func (s *Server) file(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		root, rel, ok := s.open(w, r, kind)
		if !ok {
			return
		}
		defer root.Close()
		f, err := root.Open(rel)
		if err != nil {
			notFound(w, err)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			http.Error(w, "sector data not found in storage", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		// No modification time: a resumed download is not refused for a touched file, and the
		// bytes of a sealed replica never change.
		http.ServeContent(&countingWriter{ResponseWriter: w, kind: kind, served: s.Served}, r, "", time.Time{}, f)
	}
}

// cache writes a tar of the allowed files of one cache directory, in name order, with bare
// names and no directory entries; every file is checked before the 200 so that a missing or
// oversized one is an error, never a short tar the client would take.
func (s *Server) cache(w http.ResponseWriter, r *http.Request) {
	root, rel, ok := s.open(w, r, KindCache)
	if !ok {
		return
	}
	defer root.Close()
	entries, err := fs.ReadDir(root.FS(), rel)
	if err != nil {
		notFound(w, err)
		return
	}
	type member struct {
		name string
		info fs.FileInfo
	}
	var members []member
	for _, e := range entries {
		limit, ok := CacheFileLimits[e.Name()]
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			notFound(w, err)
			return
		}
		if info.Size() > limit {
			http.Error(w, fmt.Sprintf("cache file %s is %d bytes, more than a client accepts (%d)", e.Name(), info.Size(), limit), http.StatusInternalServerError)
			return
		}
		members = append(members, member{e.Name(), info})
	}
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.name
	}
	if err := complete(names); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	sort.Slice(members, func(i, j int) bool { return members[i].name < members[j].name })
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(&countingWriter{ResponseWriter: w, kind: KindCache, served: s.Served, status: http.StatusOK})
	for _, m := range members {
		if err := writeMember(tw, root, path.Join(rel, m.name), m.info); err != nil {
			// The status is out: cut the tar short so the client's reader fails, not succeeds.
			panic(http.ErrAbortHandler)
		}
	}
	if err := tw.Close(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// complete says what a finalized cache lacks: p_aux, t_aux and tree-r-last.
func complete(names []string) error {
	have := map[string]bool{}
	treeR := false
	for _, n := range names {
		have[n] = true
		treeR = treeR || strings.HasPrefix(n, "sc-02-data-tree-r-last")
	}
	var missing []string
	for _, n := range []string{"p_aux", "t_aux"} {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if !treeR {
		missing = append(missing, "sc-02-data-tree-r-last*.dat")
	}
	if len(missing) > 0 {
		return fmt.Errorf("sector cache incomplete: no %s", strings.Join(missing, ", "))
	}
	return nil
}

func writeMember(tw *tar.Writer, root *os.Root, name string, info fs.FileInfo) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr, err := tar.FileInfoHeader(info, "")
	if err != nil {
		return err
	}
	hdr.Name = path.Base(name)
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, info.Size())
	return err
}

func notFound(w http.ResponseWriter, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "sector data not found in storage", http.StatusNotFound)
		return
	}
	http.Error(w, "sector data not available", http.StatusInternalServerError)
}

// countingWriter counts the payload bytes written (of 200 and 206 answers, not error texts)
// for the node's bandwidth metric.
type countingWriter struct {
	http.ResponseWriter
	kind   string
	served func(kind string, n int64)
	status int
}

func (c *countingWriter) WriteHeader(code int) {
	c.status = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	if c.served != nil && n > 0 && (c.status == 0 || c.status == http.StatusOK || c.status == http.StatusPartialContent) {
		c.served(c.kind, int64(n))
	}
	return n, err
}
