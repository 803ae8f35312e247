package delegatedv0

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors a Backend returns, each answered with the status code Curio's client expects.
var (
	// ErrUnauthorized: no partner has this token (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound: the partner has no such sector, or its file is gone (404).
	ErrNotFound = errors.New("sector not found")
	// ErrNotReady: the sector's trees are not complete yet (412).
	ErrNotReady = errors.New("sector trees not yet complete")
)

// Rejection refuses an order: 200 with accepted: false and Reason, which Curio's client logs.
type Rejection struct{ Reason string }

func (r *Rejection) Error() string { return r.Reason }

// Partner is an authenticated client, as the Backend knows it. It never holds the token.
type Partner struct {
	// ID keys the partner in the Backend (and slot reservations).
	ID                 string
	Name               string
	AllowanceRemaining int64
}

// Payload is where a response's bytes come from: a redirect to the node that holds them (the
// provider's process never carries a sector's bytes), or, for small payloads, a body.
type Payload struct {
	Redirect string
	Body     io.ReadCloser
	// ContentType of Body (application/octet-stream when empty).
	ContentType string
}

// Backend is what the protocol needs from the provider: partners, orders and sectors.
type Backend interface {
	// Authenticate returns the partner holding token, or ErrUnauthorized.
	Authenticate(ctx context.Context, token string) (Partner, error)
	Capabilities(ctx context.Context) (CapabilitiesResponse, error)
	// Capacity is how many more sectors p may order now (its allowance and its limit of
	// sectors in flight); the server subtracts its own outstanding reservations.
	Capacity(ctx context.Context, p Partner) (int64, error)
	// Order records the order, idempotently per sector: a repeat by the same partner is
	// accepted again. reserved says a valid slot token was spent on it; without one the
	// Backend checks capacity itself. A refusal is a *Rejection.
	Order(ctx context.Context, p Partner, s SectorID, regSealProof int, reserved bool) error
	// Status of p's sector; State "gone" when p has no such sector.
	Status(ctx context.Context, p Partner, s SectorID) (StatusResponse, error)
	// SealedData and CacheData locate the replica and the finalized cache's tar.
	SealedData(ctx context.Context, p Partner, s SectorID) (Payload, error)
	CacheData(ctx context.Context, p Partner, s SectorID) (Payload, error)
	// Commit1 gives the sector its seed and returns the C1 output once it exists (the client
	// waits for it, without a timeout).
	Commit1(ctx context.Context, p Partner, s SectorID, seed []byte) (Payload, error)
	// Finalize: the client needs the layers no more. Cleanup: nor anything else. Both are
	// idempotent and succeed for a sector the partner does not have.
	Finalize(ctx context.Context, p Partner, s SectorID) error
	Cleanup(ctx context.Context, p Partner, s SectorID) error
}

// Server serves the provider's routes over a Backend.
type Server struct {
	Backend Backend
	// Now is the clock of slot reservations (time.Now when nil).
	Now func() time.Time
	// Error reports what a 500 hides from the client; never called with a token.
	Error func(route string, err error)
	// Observe reports each request's route, status code and duration (metrics); may be nil.
	Observe func(route string, code int, d time.Duration)

	mu    sync.Mutex
	slots map[string]slot
}

// slot is a reservation /available handed out and /order spends.
type slot struct {
	partner  string
	deadline time.Time
}

// maxBody bounds a request body: every request is a few hundred bytes of JSON.
const maxBody = 64 << 10

// Handler routes BasePath's endpoints; anything else is 404, a wrong method 405.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range []struct {
		method, route string
		h             http.HandlerFunc
	}{
		{"GET", "capabilities", s.capabilities},
		{"POST", "authorize", s.authorize},
		{"POST", "available", s.available},
		{"POST", "order", s.order},
		{"POST", "status", s.status},
		{"GET", "sealed-data/{sp_id}/{sector_number}", s.data(Backend.SealedData)},
		{"GET", "cache-data/{sp_id}/{sector_number}", s.data(Backend.CacheData)},
		{"POST", "commit1", s.commit1},
		{"POST", "finalize", s.sectorCall(Backend.Finalize)},
		{"POST", "cleanup", s.sectorCall(Backend.Cleanup)},
	} {
		mux.HandleFunc(r.method+" "+BasePath+r.route, s.observed(strings.SplitN(r.route, "/", 2)[0], r.h))
	}
	return mux
}

// observed reports a route's requests to Observe.
func (s *Server) observed(route string, h http.HandlerFunc) http.HandlerFunc {
	if s.Observe == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		rec := &codeRecorder{ResponseWriter: w, code: http.StatusOK}
		h(rec, r)
		s.Observe(route, rec.code, time.Since(t0))
	}
}

// codeRecorder remembers the status code written.
type codeRecorder struct {
	http.ResponseWriter
	code int
}

func (c *codeRecorder) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	c, err := s.Backend.Capabilities(r.Context())
	if err != nil {
		s.fail(w, "capabilities", err)
		return
	}
	writeJSON(w, c)
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	var req AuthorizeRequest
	if !decode(w, r, &req) {
		return
	}
	p, err := s.Backend.Authenticate(r.Context(), req.PartnerToken)
	if errors.Is(err, ErrUnauthorized) {
		writeJSON(w, AuthorizeResponse{}) // an unknown token is an answer, not an error
		return
	}
	if err != nil {
		s.fail(w, "authorize", err)
		return
	}
	writeJSON(w, AuthorizeResponse{Authorized: true, PartnerName: p.Name, AllowanceRemaining: p.AllowanceRemaining})
}

// available reserves one sector of the partner's capacity for SlotTTL seconds: reservations
// not yet spent count against it, so two clients racing for the last slot cannot both win.
func (s *Server) available(w http.ResponseWriter, r *http.Request) {
	var req AuthorizeRequest
	if !decode(w, r, &req) {
		return
	}
	p, ok := s.authenticate(w, r, "available", req.PartnerToken)
	if !ok {
		return
	}
	free, err := s.Backend.Capacity(r.Context(), p)
	if err != nil {
		s.fail(w, "available", err)
		return
	}
	token, ok := s.reserve(p, free)
	if !ok {
		writeJSON(w, AvailableResponse{})
		return
	}
	writeJSON(w, AvailableResponse{Available: true, SlotToken: token})
}

func (s *Server) reserve(p Partner, free int64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var held int64
	for t, sl := range s.slots {
		switch {
		case now.After(sl.deadline):
			delete(s.slots, t)
		case sl.partner == p.ID:
			held++
		}
	}
	if free-held <= 0 {
		return "", false
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	token := hex.EncodeToString(b)
	if s.slots == nil {
		s.slots = map[string]slot{}
	}
	s.slots[token] = slot{partner: p.ID, deadline: now.Add(SlotTTL * time.Second)}
	return token, true
}

// spend takes a slot token out of the book whatever its state (single use) and says whether
// it was p's and unexpired.
func (s *Server) spend(p Partner, token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, ok := s.slots[token]
	delete(s.slots, token)
	return ok && sl.partner == p.ID && !s.now().After(sl.deadline)
}

func (s *Server) order(w http.ResponseWriter, r *http.Request) {
	var req OrderRequest
	if !decode(w, r, &req) {
		return
	}
	p, sector, ok := s.caller(w, r, "order", req.PartnerToken, req.SpID, req.SectorNumber)
	if !ok {
		return
	}
	if _, _, err := ProofOf(req.RegSealProof); err != nil {
		writeJSON(w, OrderResponse{RejectReason: err.Error()})
		return
	}
	reserved := false
	if req.SlotToken != "" {
		if !s.spend(p, req.SlotToken) {
			writeJSON(w, OrderResponse{RejectReason: "invalid or expired slot token: call available again"})
			return
		}
		reserved = true
	}
	err := s.Backend.Order(r.Context(), p, sector, req.RegSealProof, reserved)
	var rej *Rejection
	switch {
	case errors.As(err, &rej):
		writeJSON(w, OrderResponse{RejectReason: rej.Reason})
	case err != nil:
		s.fail(w, "order", err)
	default:
		writeJSON(w, OrderResponse{Accepted: true})
	}
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	var req SectorRequest
	if !decode(w, r, &req) {
		return
	}
	p, sector, ok := s.caller(w, r, "status", req.PartnerToken, req.SpID, req.SectorNumber)
	if !ok {
		return
	}
	st, err := s.Backend.Status(r.Context(), p, sector)
	if err != nil {
		s.fail(w, "status", err)
		return
	}
	writeJSON(w, st)
}

// data serves sealed-data and cache-data: the token comes in the query (Curio's downloaders
// append ?token=), the bytes from the node that holds them.
func (s *Server) data(locate func(Backend, context.Context, Partner, SectorID) (Payload, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sp, err1 := strconv.ParseInt(r.PathValue("sp_id"), 10, 64)
		num, err2 := strconv.ParseInt(r.PathValue("sector_number"), 10, 64)
		switch {
		case err1 != nil || sp < 0:
			http.Error(w, "invalid sp_id", http.StatusBadRequest)
			return
		case err2 != nil || num < 0:
			http.Error(w, "invalid sector_number", http.StatusBadRequest)
			return
		}
		p, ok := s.authenticate(w, r, "data", r.URL.Query().Get("token"))
		if !ok {
			return
		}
		pl, err := locate(s.Backend, r.Context(), p, SectorID{SpID: sp, Number: num})
		if err != nil {
			s.fail(w, "data", err)
			return
		}
		s.send(w, r, pl)
	}
}

func (s *Server) commit1(w http.ResponseWriter, r *http.Request) {
	var req Commit1Request
	if !decode(w, r, &req) {
		return
	}
	p, sector, ok := s.caller(w, r, "commit1", req.PartnerToken, req.SpID, req.SectorNumber)
	if !ok {
		return
	}
	if len(req.SeedValue) != 32 {
		http.Error(w, fmt.Sprintf("seed_value must be 32 bytes (base64), got %d", len(req.SeedValue)), http.StatusBadRequest)
		return
	}
	pl, err := s.Backend.Commit1(r.Context(), p, sector, req.SeedValue)
	if err != nil {
		s.fail(w, "commit1", err)
		return
	}
	s.send(w, r, pl)
}

// sectorCall serves finalize and cleanup: 200 with an empty body once done.
func (s *Server) sectorCall(call func(Backend, context.Context, Partner, SectorID) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req SectorRequest
		if !decode(w, r, &req) {
			return
		}
		p, sector, ok := s.caller(w, r, r.URL.Path, req.PartnerToken, req.SpID, req.SectorNumber)
		if !ok {
			return
		}
		if err := call(s.Backend, r.Context(), p, sector); err != nil {
			s.fail(w, r.URL.Path, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// caller authenticates a request about one sector and checks the sector's numbers.
func (s *Server) caller(w http.ResponseWriter, r *http.Request, route, token string, sp, num int64) (Partner, SectorID, bool) {
	p, ok := s.authenticate(w, r, route, token)
	if !ok {
		return Partner{}, SectorID{}, false
	}
	sector, ok := sectorOf(w, sp, num)
	return p, sector, ok
}

func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, route, token string) (Partner, bool) {
	p, err := s.Backend.Authenticate(r.Context(), token)
	if err != nil {
		s.fail(w, route, err)
		return Partner{}, false
	}
	return p, true
}

// send answers with a payload: a temporary redirect (307 keeps the method, body and Range
// header) to the node, or the body itself.
func (s *Server) send(w http.ResponseWriter, r *http.Request, pl Payload) {
	if pl.Redirect != "" {
		if pl.Body != nil {
			_ = pl.Body.Close()
		}
		http.Redirect(w, r, pl.Redirect, http.StatusTemporaryRedirect)
		return
	}
	if pl.Body == nil {
		s.fail(w, r.URL.Path, errors.New("backend returned an empty payload"))
		return
	}
	defer pl.Body.Close()
	ct := pl.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, pl.Body)
}

// fail answers an error with its status code and a plain-text body, as Curio does; an
// unexpected error is reported to the provider and hidden from the client.
func (s *Server) fail(w http.ResponseWriter, route string, err error) {
	var rej *Rejection
	switch {
	case errors.Is(err, ErrUnauthorized):
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	case errors.Is(err, ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, ErrNotReady):
		http.Error(w, err.Error(), http.StatusPreconditionFailed)
	case errors.As(err, &rej):
		http.Error(w, rej.Reason, http.StatusConflict)
	default:
		if s.Error != nil {
			s.Error(route, err)
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}

// decode reads a JSON request body, refusing another content type (400) as Curio does; a
// charset parameter is accepted.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "Content-Type must be application/json", http.StatusBadRequest)
		return false
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(v); err != nil {
		http.Error(w, "invalid request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func sectorOf(w http.ResponseWriter, sp, num int64) (SectorID, bool) {
	switch {
	case sp < 0:
		http.Error(w, "invalid sp_id: must be an actor id (0 or more)", http.StatusBadRequest)
		return SectorID{}, false
	case num < 0:
		http.Error(w, "invalid sector_number: must be 0 or more", http.StatusBadRequest)
		return SectorID{}, false
	}
	return SectorID{SpID: sp, Number: num}, true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}
