package delegatedv0

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// The provider's calls on its client: the seal ticket is drawn from the client's chain (the
// sector is the client's), and the client is told when a sector is complete. Curio's client
// also polls status, so a lost notice only costs time.

// FetchTicket asks the client at partnerURL for seal randomness for miner maddr (an ID
// address, f0… or t0…). The client's route needs no token.
func FetchTicket(ctx context.Context, hc *http.Client, partnerURL, maddr string) (TicketResponse, error) {
	u, err := url.JoinPath(partnerURL, BasePath, "ticket")
	if err != nil {
		return TicketResponse{}, fmt.Errorf("partner url %q: %w", partnerURL, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"?maddr="+url.QueryEscape(maddr), nil)
	if err != nil {
		return TicketResponse{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return TicketResponse{}, fmt.Errorf("ticket from %s: %w", partnerURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return TicketResponse{}, fmt.Errorf("ticket from %s: %s: %s", partnerURL, resp.Status, excerpt(resp.Body))
	}
	var t TicketResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&t); err != nil {
		return TicketResponse{}, fmt.Errorf("ticket from %s: %w", partnerURL, err)
	}
	if len(t.Ticket) != 32 || t.Epoch < 0 {
		return TicketResponse{}, fmt.Errorf("ticket from %s: want 32 bytes at a non-negative epoch, got %d bytes at epoch %d", partnerURL, len(t.Ticket), t.Epoch)
	}
	return t, nil
}

// NotifyComplete posts n to the client at partnerURL; only a 200 counts as delivered.
func NotifyComplete(ctx context.Context, hc *http.Client, partnerURL string, n CompleteNotification) error {
	u, err := url.JoinPath(partnerURL, BasePath, "complete")
	if err != nil {
		return fmt.Errorf("partner url %q: %w", partnerURL, err)
	}
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("complete to %s: %w", partnerURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("complete to %s: %s: %s", partnerURL, resp.Status, excerpt(resp.Body))
	}
	return nil
}

// excerpt is the start of an error body, for messages.
func excerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return strings.TrimSpace(string(b))
}

// connect is the connect string's payload.
type connect struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// ConnectString is what a client's admin pastes into Curio: padded standard base64 of
// {"url": providerURL, "token": token}.
func ConnectString(providerURL, token string) string {
	b, _ := json.Marshal(connect{URL: providerURL, Token: token}) // two strings always marshal
	return base64.StdEncoding.EncodeToString(b)
}

// ParseConnectString is ConnectString's inverse, as Curio's client reads it.
func ParseConnectString(s string) (providerURL, token string, err error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return "", "", fmt.Errorf("connect string is not base64: %w", err)
	}
	var c connect
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", "", fmt.Errorf("connect string is not {url, token} JSON: %w", err)
	}
	if c.URL == "" || c.Token == "" {
		return "", "", fmt.Errorf("connect string lacks url or token")
	}
	return c.URL, c.Token, nil
}
