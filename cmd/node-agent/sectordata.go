package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sealfleet/sealfleet/internal/nodeagent"
	"github.com/sealfleet/sealfleet/internal/remoteseal/sectordata"
)

// sectorDataFlags configure the server that hands sealed sectors to remote-seal partners.
type sectorDataFlags struct {
	addr, url, keyFile, root, certFile, keyPEM string
	// caDir holds the chart's sector-data CA (tls.crt, tls.key): the agent issues itself a
	// certificate for the address it publishes.
	caDir string
	// insecure: plain HTTP, said explicitly (no certificate and no CA given otherwise fails).
	insecure bool
}

// tls reports whether the server speaks HTTPS, or why its flags are wrong.
func (f sectorDataFlags) tls() (bool, error) {
	given := 0
	for _, set := range []bool{f.certFile != "", f.caDir != "", f.insecure} {
		if set {
			given++
		}
	}
	switch {
	case given != 1:
		return false, errors.New("the sector data server needs exactly one of --sector-data-tls-cert (with --sector-data-tls-key), --sector-data-tls-ca-dir, or --sector-data-insecure-http")
	case f.certFile != "" && f.keyPEM == "":
		return false, errors.New("--sector-data-tls-cert needs --sector-data-tls-key")
	}
	return !f.insecure, nil
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
	if secure, err := f.tls(); err != nil {
		return "", err
	} else if secure {
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
	secure, err := f.tls()
	if err != nil {
		return nil, err
	}
	if f.caDir != "" {
		if srv.TLSConfig, err = f.issued(); err != nil {
			return nil, err
		}
	}
	log := logf.FromContext(ctx)
	go func() {
		var err error
		if secure {
			err = srv.ServeTLS(ln, f.certFile, f.keyPEM) // files empty: srv.TLSConfig's certificate
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

// issued is the TLS config with a certificate for the published URL's host, signed by the CA
// in --sector-data-tls-ca-dir.
func (f sectorDataFlags) issued() (*tls.Config, error) {
	caCert, err := os.ReadFile(filepath.Join(f.caDir, "tls.crt"))
	if err != nil {
		return nil, fmt.Errorf("--sector-data-tls-ca-dir: %w", err)
	}
	caKey, err := os.ReadFile(filepath.Join(f.caDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("--sector-data-tls-ca-dir: %w", err)
	}
	pub, err := f.publicURL()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(pub)
	if err != nil {
		return nil, fmt.Errorf("sector data URL %q: %w", pub, err)
	}
	cert, err := sectordata.IssueServingCert(caCert, caKey, u.Hostname(), time.Now())
	if err != nil {
		return nil, fmt.Errorf("--sector-data-tls-ca-dir %s: %w", f.caDir, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
