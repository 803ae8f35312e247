package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sealfleet/sealfleet/internal/nodeagent"
	"github.com/sealfleet/sealfleet/internal/remoteseal/sectordata"
)

// sectorDataFlags configure the server that hands sealed sectors to remote-seal partners.
type sectorDataFlags struct {
	addr, url, keyFile, root, certFile, keyPEM string
}

// publicURL is what the agent publishes in status.sectorDataURL: --sector-data-url, or the
// node's address (HOST_IP from the downward API) and the bound port.
func (f sectorDataFlags) publicURL() (string, error) {
	if f.url != "" {
		return strings.TrimSuffix(f.url, "/"), nil
	}
	_, port, err := net.SplitHostPort(f.addr)
	if err != nil {
		return "", fmt.Errorf("--sector-data-bind-address %q: %w", f.addr, err)
	}
	host := os.Getenv("HOST_IP")
	if host == "" {
		return "", errors.New("--sector-data-url is needed: HOST_IP (the downward API's status.hostIP) is not set")
	}
	scheme := "http"
	if f.certFile != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// serveSectorData starts the server; the signing key is shared with the operator.
func serveSectorData(ctx context.Context, f sectorDataFlags, m *nodeagent.Metrics) (*http.Server, error) {
	key, err := os.ReadFile(f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--sector-data-key-file: %w", err)
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("--sector-data-key-file %s holds %d bytes: the signing key must be at least 32", f.keyFile, len(key))
	}
	s := &sectordata.Server{Signer: sectordata.Signer{Key: key}, Root: f.root, Served: m.SectorDataServed}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second}
	log := logf.FromContext(ctx)
	go func() {
		var err error
		if f.certFile != "" {
			err = srv.ServeTLS(ln, f.certFile, f.keyPEM)
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "sector data server stopped")
		}
	}()
	log.Info("serving sector data", "address", ln.Addr().String(), "root", f.root)
	return srv, nil
}
