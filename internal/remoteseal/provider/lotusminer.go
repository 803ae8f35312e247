package provider

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// LabelLotusMiner marks a Secret as a lotus-miner connection batches may hand their sectors
// to (SealBatch spec.handoff.lotusMiner names it).
const LabelLotusMiner = "sealfleet.io/lotus-miner"

// The keys of a lotus-miner Secret (besides KeyToken, an admin API token).
const (
	// KeyAPIURL is the miner's JSON-RPC endpoint, e.g. http://miner:2345/rpc/v0.
	KeyAPIURL = "apiURL"
	// KeyMinerID is the miner actor (f0… or t0…); only batches for it are handed over.
	KeyMinerID = "minerID"
)

var minerIDPattern = regexp.MustCompile(`^[ft]0(0|[1-9][0-9]{0,18})$`)

// LotusMiner is a parsed lotus-miner Secret; its token is only handed to the API client.
type LotusMiner struct {
	Name    string
	APIURL  string
	MinerID string
	token   string
}

// String names the miner without its token (for logs and events).
func (m LotusMiner) String() string { return "lotus-miner " + m.Name + " (" + m.MinerID + ")" }

// Token is the admin API token, for the client that calls the miner.
func (m LotusMiner) Token() string { return m.token }

// ParseLotusMiner reads a lotus-miner Secret, naming the key and the fix on any problem.
func ParseLotusMiner(s *corev1.Secret) (LotusMiner, error) {
	where := fmt.Sprintf("lotus-miner Secret %s/%s", s.Namespace, s.Name)
	if s.Labels[LabelLotusMiner] == "" {
		return LotusMiner{}, fmt.Errorf("%s: not labelled %s=true (an admin marks the Secrets batches may name)", where, LabelLotusMiner)
	}
	m := LotusMiner{Name: s.Name, token: strings.TrimSpace(string(s.Data[KeyToken]))}
	if m.token == "" {
		return LotusMiner{}, fmt.Errorf("%s: data.%s must hold an admin API token (lotus-miner auth create-token --perm admin)", where, KeyToken)
	}
	m.APIURL = strings.TrimSpace(string(s.Data[KeyAPIURL]))
	if u, err := url.Parse(m.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return LotusMiner{}, fmt.Errorf("%s: data.%s %q must be the miner's JSON-RPC endpoint (http://host:2345/rpc/v0)", where, KeyAPIURL, m.APIURL)
	}
	m.MinerID = strings.TrimSpace(string(s.Data[KeyMinerID]))
	if !minerIDPattern.MatchString(m.MinerID) {
		return LotusMiner{}, fmt.Errorf("%s: data.%s %q must be the miner's ID address (f0… or t0…)", where, KeyMinerID, m.MinerID)
	}
	return m, nil
}
