package provider_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
)

// TestParsePartner: every bad key is named with its fix, and the token never appears in an
// error or the partner's string.
func TestParsePartner(t *testing.T) {
	good := partnerSecret("alpha", tokenA, "4", "8, 13")
	p, err := provider.ParsePartner(good)
	if err != nil || p.Name != "alpha" || p.MaxSectors != 4 || !p.Allows(13) || p.Allows(9) || !p.Matches(tokenA) || p.Matches(tokenB) || p.Matches("") {
		t.Fatalf("good partner: %+v %v", p, err)
	}
	if strings.Contains(p.String(), tokenA) {
		t.Errorf("String() shows the token")
	}
	for key, tc := range map[string]struct {
		value, want string
	}{
		provider.KeyToken:      {"too-short", "data.token must hold the shared token"},
		provider.KeyURL:        {"ftp://x", "data.url \"ftp://x\" must be the partner Curio's base URL"},
		provider.KeyMaxSectors: {"0", "data.maxSectors \"0\" must be a positive number"},
		provider.KeyProofTypes: {"8,x", "data.proofTypes \"8,x\" must list reg_seal_proof numbers"},
	} {
		s := good.DeepCopy()
		s.Data[key] = []byte(tc.value)
		_, err := provider.ParsePartner(s)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tokenA) {
			t.Errorf("%s=%q: %v, want %q", key, tc.value, err, tc.want)
		}
	}
	s := good.DeepCopy()
	s.Data[provider.KeyProofTypes] = []byte("42")
	if _, err := provider.ParsePartner(s); err == nil || !strings.Contains(err.Error(), "reg_seal_proof 42") {
		t.Errorf("unknown proof type: %v", err)
	}
	found, ok, problems := provider.Find([]corev1.Secret{*partnerSecret("broken", "x", "1", ""), *good}, tokenA)
	if !ok || found.Name != "alpha" || len(problems) != 1 {
		t.Errorf("Find: %v %v %v", found, ok, problems)
	}
}

func TestParseLotusMiner(t *testing.T) {
	ok := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "sf", Labels: map[string]string{provider.LabelLotusMiner: "true"}},
			Data: map[string][]byte{provider.KeyToken: []byte("eyJhbGciOi.admin\n"), provider.KeyAPIURL: []byte("http://miner:2345/rpc/v0"), provider.KeyMinerID: []byte("t01000")}}
	}
	m, err := provider.ParseLotusMiner(ok())
	if err != nil || m.Token() != "eyJhbGciOi.admin" || m.MinerID != "t01000" || strings.Contains(m.String(), "admin") {
		t.Fatalf("%+v %v", m, err)
	}
	for want, edit := range map[string]func(*corev1.Secret){
		"not labelled":         func(s *corev1.Secret) { s.Labels = nil },
		"data.token":           func(s *corev1.Secret) { delete(s.Data, provider.KeyToken) },
		"data.apiURL":          func(s *corev1.Secret) { s.Data[provider.KeyAPIURL] = []byte("miner:2345") },
		"data.minerID \"f1x\"": func(s *corev1.Secret) { s.Data[provider.KeyMinerID] = []byte("f1x") },
	} {
		s := ok()
		edit(s)
		if _, err := provider.ParseLotusMiner(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
