package lotusreceive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Client calls a lotus-miner's JSON-RPC API (its /rpc/v0 endpoint) with an admin token
// (SectorReceive needs the admin permission).
type Client struct {
	// URL is the API endpoint, e.g. http://miner:2345/rpc/v0.
	URL   string
	Token string
	HTTP  *http.Client
	id    atomic.Int64
}

type request struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
	ID      int64  `json:"id"`
}

type response struct {
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// call makes one JSON-RPC 2.0 call; a JSON-RPC error comes back as *RPCError, anything else
// (network, HTTP status, a body that is not JSON-RPC) as another error.
func (c *Client) call(ctx context.Context, method string, result any, params ...any) error {
	body, err := json.Marshal(request{JSONRPC: "2.0", Method: method, Params: params, ID: c.id.Add(1)})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("lotus-miner API %q: %w", c.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("lotus-miner API %s: %w", method, err)
	}
	defer resp.Body.Close() //nolint:errcheck
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("lotus-miner API %s: reading the answer: %w", method, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("lotus-miner API %s: %s: the token was refused (SectorReceive needs an admin token: lotus-miner auth create-token --perm admin)", method, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("lotus-miner API %s: %s: %s", method, resp.Status, strings.TrimSpace(string(raw[:min(len(raw), 512)])))
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("lotus-miner API %s: not a JSON-RPC answer: %w", method, err)
	}
	if r.Error != nil {
		return r.Error
	}
	if result != nil && len(r.Result) > 0 && string(r.Result) != "null" {
		if err := json.Unmarshal(r.Result, result); err != nil {
			return fmt.Errorf("lotus-miner API %s: result: %w", method, err)
		}
	}
	return nil
}

// SectorReceive hands a sealed sector to lotus' sealing pipeline.
func (c *Client) SectorReceive(ctx context.Context, meta RemoteSectorMeta) error {
	return c.call(ctx, "Filecoin.SectorReceive", nil, meta)
}

// SectorsStatus reads what lotus knows of a sector.
func (c *Client) SectorsStatus(ctx context.Context, number int64) (SectorInfo, error) {
	var si SectorInfo
	err := c.call(ctx, "Filecoin.SectorsStatus", &si, number, false)
	return si, err
}

// Receive hands meta over once: when lotus already has the sector (a call whose answer was
// lost, or a restart between the call and its record) it is taken as received only if lotus'
// CommR is meta's; otherwise lotus' refusal is returned as it is.
func (c *Client) Receive(ctx context.Context, meta RemoteSectorMeta) error {
	err := c.SectorReceive(ctx, meta)
	var rpc *RPCError
	if err == nil || !errors.As(err, &rpc) || !strings.Contains(rpc.Message, "already exists") {
		return err
	}
	si, serr := c.SectorsStatus(ctx, int64(meta.Sector.Number))
	if serr != nil {
		return fmt.Errorf("%w (and reading the sector lotus has: %v)", err, serr)
	}
	if si.CommR != nil && meta.CommR != nil && si.CommR.Str == meta.CommR.Str {
		return nil
	}
	return fmt.Errorf("%w: lotus holds another sector %d (state %s), not the one sealfleet sealed", err, meta.Sector.Number, si.State)
}

// Request is a JSON-RPC request as a server reads it (the lotus-miner side, in tests that
// stand in for it).
type Request struct {
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
	ID     int64             `json:"id"`
}

// ReadRequest decodes a JSON-RPC request body.
func ReadRequest(r *http.Request) (Request, error) {
	var req Request
	err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req)
	return req, err
}

// WriteAnswer writes a JSON-RPC answer to request id: result, or rpcErr when not nil.
func WriteAnswer(w http.ResponseWriter, id int64, result any, rpcErr *RPCError) {
	answer := map[string]any{"jsonrpc": "2.0", "id": id}
	if rpcErr != nil {
		answer["error"] = rpcErr
	} else {
		answer["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}
