package sectordata

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// ServingCertValidity is how long a certificate IssueServingCert makes is valid: the agent
// issues a new one at every start, so a year only has to outlast an agent's uptime.
const ServingCertValidity = 365 * 24 * time.Hour

// IssueServingCert makes the sector data server's TLS certificate for host (the IP address
// or DNS name partners reach this node at), signed by the CA in caCertPEM/caKeyPEM (the
// chart's sector-data CA, which partners trust): each node agent issues its own, since only
// it knows the address it is reached at. The key is a fresh P-256 key that never leaves the
// process.
func IssueServingCert(caCertPEM, caKeyPEM []byte, host string, now time.Time) (tls.Certificate, error) {
	ca, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("the sector-data CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("the sector-data CA certificate: %w", err)
	}
	if !caCert.IsCA || caCert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return tls.Certificate{}, errors.New("the sector-data CA certificate may not sign certificates (not a CA, or no certSign key usage)")
	}
	if host == "" {
		return tls.Certificate{}, errors.New("no host to issue the sector-data certificate for")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host, Organization: []string{"sealfleet node agent"}},
		NotBefore:    now.Add(-5 * time.Minute), // partners' clocks may run behind
		NotAfter:     now.Add(ServingCertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	if caCert.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issuing the sector-data certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.X509KeyPair(append(chain, caCertPEM...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}
