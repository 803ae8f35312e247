package sectordata

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func testCA(t *testing.T, isCA bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test sector-data CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	if !isCA {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// TestServingCertIsTrustedThroughTheCA: a client trusting only the CA reaches a server using
// the issued certificate at the IP it was issued for; another name is refused, and a CA that
// may not sign is refused at issue time.
func TestServingCertIsTrustedThroughTheCA(t *testing.T) {
	caCert, caKey := testCA(t, true)
	cert, err := IssueServingCert(caCert, caKey, "127.0.0.1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("sector")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caCert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(srv.URL) // https://127.0.0.1:port
	if err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	resp.Body.Close()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-2.example"}); err == nil {
		t.Error("the certificate verifies for a name it was not issued for")
	}
	if _, err := http.Get(srv.URL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting only the system roots: %v", err)
	}
	if dns, err := IssueServingCert(caCert, caKey, "node-1.example", time.Now()); err != nil {
		t.Error(err)
	} else if l, _ := x509.ParseCertificate(dns.Certificate[0]); len(l.DNSNames) != 1 || l.DNSNames[0] != "node-1.example" || !l.NotAfter.After(time.Now()) {
		t.Errorf("DNS certificate: %v until %s", l.DNSNames, l.NotAfter)
	}
	notCA, notCAKey := testCA(t, false)
	if _, err := IssueServingCert(notCA, notCAKey, "127.0.0.1", time.Now()); err == nil || !strings.Contains(err.Error(), "may not sign") {
		t.Errorf("a certificate that is no CA: %v", err)
	}
	if _, err := IssueServingCert(caCert, caKey, "", time.Now()); err == nil {
		t.Error("issued for no host")
	}
}
