// Package provider is sealfleet's side of the delegated remote-seal protocol: partners are
// Secrets an admin creates, orders are SealOrder objects, and what the protocol asks of a
// sector is answered from the order and the SealBatch sealing it (delegatedv0.Backend).
package provider

import (
	"crypto/subtle"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
)

// LabelPartner marks a Secret as a remote-seal partner; the Secret's name is the partner's.
const LabelPartner = "sealfleet.io/remote-seal-partner"

// The keys of a partner Secret.
const (
	// KeyToken is the shared secret (at least 32 characters; Curio makes 64 hex).
	KeyToken = "token"
	// KeyURL is the partner's Curio base URL, where its ticket and complete routes are.
	KeyURL = "url"
	// KeyMaxSectors is how many of its sectors may be in flight (ordered, not cleaned up).
	KeyMaxSectors = "maxSectors"
	// KeyProofTypes lists the reg_seal_proof numbers it may order, comma separated (absent:
	// every one sealfleet seals).
	KeyProofTypes = "proofTypes"
)

// Partner is a parsed partner Secret. Its token never leaves this package's comparisons.
type Partner struct {
	Name       string
	URL        string
	MaxSectors int64
	// ProofTypes allowed; nil: all.
	ProofTypes []int
	token      []byte
}

// String names the partner without its token (for logs and events).
func (p Partner) String() string { return "partner " + p.Name }

// ParsePartner reads a partner Secret, naming the key and the fix on any problem.
func ParsePartner(s *corev1.Secret) (Partner, error) {
	p := Partner{Name: s.Name, token: s.Data[KeyToken]}
	where := fmt.Sprintf("remote-seal partner Secret %s/%s", s.Namespace, s.Name)
	if len(p.token) < 32 {
		return Partner{}, fmt.Errorf("%s: data.%s must hold the shared token, at least 32 characters (e.g. openssl rand -hex 32)", where, KeyToken)
	}
	p.URL = strings.TrimSpace(string(s.Data[KeyURL]))
	if u, err := url.Parse(p.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return Partner{}, fmt.Errorf("%s: data.%s %q must be the partner Curio's base URL (https://host[:port])", where, KeyURL, p.URL)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(s.Data[KeyMaxSectors])), 10, 64)
	if err != nil || n <= 0 {
		return Partner{}, fmt.Errorf("%s: data.%s %q must be a positive number of sectors in flight", where, KeyMaxSectors, s.Data[KeyMaxSectors])
	}
	p.MaxSectors = n
	if raw := strings.TrimSpace(string(s.Data[KeyProofTypes])); raw != "" {
		for _, f := range strings.Split(raw, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return Partner{}, fmt.Errorf("%s: data.%s %q must list reg_seal_proof numbers, e.g. 8,9", where, KeyProofTypes, raw)
			}
			if _, _, err := v0.ProofOf(n); err != nil {
				return Partner{}, fmt.Errorf("%s: data.%s: %w", where, KeyProofTypes, err)
			}
			p.ProofTypes = append(p.ProofTypes, n)
		}
	}
	return p, nil
}

// Matches compares a presented token in constant time.
func (p Partner) Matches(token string) bool {
	return len(token) > 0 && subtle.ConstantTimeCompare(p.token, []byte(token)) == 1
}

// Token is the shared secret, for the calls sealfleet makes on the partner (complete).
func (p Partner) Token() string { return string(p.token) }

// Allows says whether the partner may order this proof type.
func (p Partner) Allows(regSealProof int) bool {
	return p.ProofTypes == nil || slices.Contains(p.ProofTypes, regSealProof)
}

// Find returns the partner whose token this is among the Secrets; every Secret is compared,
// so the time taken does not say which (or whether one) matched. Secrets that do not parse
// are skipped and returned as problems for the operator to report.
func Find(secrets []corev1.Secret, token string) (Partner, bool, []error) {
	var found Partner
	ok := false
	var problems []error
	for i := range secrets {
		p, err := ParsePartner(&secrets[i])
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if p.Matches(token) && !ok {
			found, ok = p, true
		}
	}
	return found, ok, problems
}
