package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/sectordata"
)

// curioClient does what Curio's remote-seal client does (tasks/remoteseal in Curio's pull
// request #971, written here from its types): delegate (available, then order with the slot
// token), poll status, fetch the sealed file (resuming with a Range from what it has) and
// the cache tar (refusing any entry outside its allow-list or over its size), commit1 with
// the seed, then finalize and cleanup. It also serves the routes a Curio client serves to
// its provider: the ticket (seal randomness, here random) and the complete notice.
type curioClient struct {
	t        *testing.T
	provider string // base URL
	token    string
	srv      *httptest.Server

	mu       sync.Mutex
	tickets  map[string]v0.TicketResponse // by maddr, the last one handed out
	complete map[int64]v0.CompleteNotification
}

func newCurioClient(t *testing.T, provider string) *curioClient {
	tok := make([]byte, 32)
	_, _ = rand.Read(tok)
	c := &curioClient{t: t, provider: provider, token: fmt.Sprintf("%x", tok), tickets: map[string]v0.TicketResponse{}, complete: map[int64]v0.CompleteNotification{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+v0.BasePath+"ticket", func(w http.ResponseWriter, r *http.Request) {
		tk := v0.TicketResponse{Ticket: make([]byte, 32), Epoch: 4000}
		_, _ = rand.Read(tk.Ticket)
		c.mu.Lock()
		c.tickets[r.URL.Query().Get("maddr")] = tk
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tk)
	})
	mux.HandleFunc("POST "+v0.BasePath+"complete", func(w http.ResponseWriter, r *http.Request) {
		var n v0.CompleteNotification
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&n) != nil {
			http.Error(w, "invalid request body", http.StatusBadRequest)
			return
		}
		if n.PartnerToken != c.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		c.mu.Lock()
		c.complete[n.SectorNumber] = n
		c.mu.Unlock()
	})
	// The provider (the operator, on the pod network) reaches this at the node's address.
	c.srv = newNodeServer(t, mux)
	return c
}

// curioHTTP is the HTTP client Curio's remote-seal client uses: each call, redirects and body
// included, within 30 s.
var curioHTTP = &http.Client{Timeout: 30 * time.Second}

func (c *curioClient) post(route string, in, out any) (int, []byte) {
	c.t.Helper()
	raw, _ := json.Marshal(in)
	resp, err := curioHTTP.Post(c.provider+v0.BasePath+route, "application/json", bytes.NewReader(raw))
	if err != nil {
		c.t.Fatalf("%s: %v", route, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			c.t.Fatalf("%s: %v: %s", route, err, body)
		}
	}
	return resp.StatusCode, body
}

// delegate is Curio's delegate task: a slot, then the order.
func (c *curioClient) delegate(sp, sector int64, proof int) error {
	var av v0.AvailableResponse
	if code, body := c.post("available", v0.AuthorizeRequest{PartnerToken: c.token}, &av); code != 200 || !av.Available {
		return fmt.Errorf("available: %d %s %+v", code, body, av)
	}
	var o v0.OrderResponse
	if code, body := c.post("order", v0.OrderRequest{PartnerToken: c.token, SlotToken: av.SlotToken, SpID: sp, SectorNumber: sector, RegSealProof: proof}, &o); code != 200 || !o.Accepted {
		return fmt.Errorf("order: %d %s %+v", code, body, o)
	}
	return nil
}

func (c *curioClient) status(sp, sector int64) v0.StatusResponse {
	var s v0.StatusResponse
	if code, body := c.post("status", v0.SectorRequest{PartnerToken: c.token, SpID: sp, SectorNumber: sector}, &s); code != 200 {
		c.t.Fatalf("status: %d %s", code, body)
	}
	return s
}

// fetchSealed downloads the replica to dst as Curio's Go downloader does: a partial file is
// resumed with Range: bytes=<have>-, and a 416 means it is complete. stopAt > 0 cuts the
// first attempt there (a broken download).
func (c *curioClient) fetchSealed(sp, sector int64, dst string, stopAt int64) error {
	u := fmt.Sprintf("%s%ssealed-data/%d/%d?token=%s", c.provider, v0.BasePath, sp, sector, c.token)
	for attempt := 0; attempt < 3; attempt++ {
		have := int64(0)
		if fi, err := os.Stat(dst); err == nil {
			have = fi.Size()
		}
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		flag := os.O_CREATE | os.O_WRONLY
		switch resp.StatusCode {
		case http.StatusOK:
			flag |= os.O_TRUNC
		case http.StatusPartialContent:
			flag |= os.O_APPEND
		case http.StatusRequestedRangeNotSatisfiable:
			resp.Body.Close()
			return nil
		default:
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return fmt.Errorf("sealed-data: %s: %s", resp.Status, body)
		}
		f, err := os.OpenFile(dst, flag, 0o644)
		if err != nil {
			resp.Body.Close()
			return err
		}
		var src io.Reader = resp.Body
		if stopAt > 0 && attempt == 0 {
			src = io.LimitReader(resp.Body, stopAt)
		}
		_, err = io.Copy(f, src)
		resp.Body.Close()
		f.Close()
		if err != nil {
			return err
		}
		if stopAt == 0 || attempt > 0 {
			return nil
		}
	}
	return errors.New("sealed-data: not complete after 3 attempts")
}

// fetchCache extracts the cache tar into dir under Curio's constraints.
func (c *curioClient) fetchCache(sp, sector int64, dir string) ([]string, error) {
	resp, err := http.Get(fmt.Sprintf("%s%scache-data/%d/%d?token=%s", c.provider, v0.BasePath, sp, sector, url.QueryEscape(c.token)))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("cache-data: %s: %s", resp.Status, body)
	}
	var names []string
	tr := tar.NewReader(resp.Body)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return names, err
		}
		limit, ok := sectordata.CacheFileLimits[h.Name]
		if !ok {
			return names, fmt.Errorf("tar file %q isn't expected", h.Name)
		}
		if h.Size > limit {
			return names, fmt.Errorf("tar file %q is %d bytes, more than %d", h.Name, h.Size, limit)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return names, err
		}
		if err := os.WriteFile(filepath.Join(dir, h.Name), data, 0o644); err != nil {
			return names, err
		}
		names = append(names, h.Name)
	}
}

// commit1 posts the seed as Curio does (no seed_epoch) and returns the status and C1 bytes.
func (c *curioClient) commit1(sp, sector int64, seed []byte) (int, []byte) {
	return c.post("commit1", v0.Commit1Request{PartnerToken: c.token, SpID: sp, SectorNumber: sector, SeedValue: seed}, nil)
}
