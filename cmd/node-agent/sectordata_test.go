package main

import (
	"strings"
	"testing"
)

// The sector data server speaks HTTPS unless plain HTTP is asked for by name, and its flags
// must say exactly one way: a certificate, the chart's CA, or plain HTTP.
func TestSectorDataSchemeFollowsItsTLSFlags(t *testing.T) {
	t.Setenv("HOST_IP", "10.1.2.3")
	for _, tc := range []struct {
		name string
		f    sectorDataFlags
		want string // the published URL, or the error's words
	}{
		{"chart CA", sectorDataFlags{addr: ":9470", caDir: "/etc/sealfleet/sector-data-tls"}, "https://10.1.2.3:9470"},
		{"admin certificate", sectorDataFlags{addr: ":9470", certFile: "/c/tls.crt", keyPEM: "/c/tls.key"}, "https://10.1.2.3:9470"},
		{"plain HTTP asked for", sectorDataFlags{addr: ":9470", insecure: true}, "http://10.1.2.3:9470"},
		{"nothing said", sectorDataFlags{addr: ":9470"}, "exactly one of"},
		{"two ways", sectorDataFlags{addr: ":9470", caDir: "/ca", insecure: true}, "exactly one of"},
		{"certificate without key", sectorDataFlags{addr: ":9470", certFile: "/c/tls.crt"}, "needs --sector-data-tls-key"},
	} {
		got, err := tc.f.publicURL()
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
