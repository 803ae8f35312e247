package provider

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/lotusreceive"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
	"github.com/sealfleet/sealfleet/internal/remoteseal/sectordata"
	"github.com/sealfleet/sealfleet/internal/render"
)

// LotusRoutePrefix is where the provider serves the calls lotus makes back for sectors
// handed to it: commit1 (C1 with the seed) and done (the sector left lotus' pipeline).
const LotusRoutePrefix = "/handoff/lotus/v0/"

// Kinds the lotus callback URLs are signed for (with the order's name as the signed path).
const (
	kindLotusCommit1 = "lotus-commit1"
	kindLotusDone    = "lotus-done"
)

// LotusEndpoints serves lotus' calls for the orders of handed-over batches. lotus keeps the
// URLs in its sector state and calls them without credentials, so each is signed for one
// order, with an expiry past any seed wait.
type LotusEndpoints struct {
	Client    client.Client
	Namespace string
	Signer    sectordata.Signer
	// Data hands out the node URL of a sector's C1 output (lotus is redirected there).
	Data DataLocator
	// Wait is how long a commit1 call waits for the C1 output before answering 503 (lotus
	// retries after its cool-down).
	Wait time.Duration
	// Fresh reads a held call's batch from the API server (nil: Client), as Backend.Fresh.
	Fresh client.Reader
	Now   func() time.Time
	// Event reports what lotus did to the batch's owner (may be nil).
	Event func(b *sealv1.SealBatch, warning bool, reason, msg string)
}

func (e *LotusEndpoints) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// URLs are the order's commit1 and done endpoints under base (the provider's public URL).
func (e *LotusEndpoints) URLs(base, order string, exp time.Time) (commit1, done string, err error) {
	for kind, out := range map[string]*string{kindLotusCommit1: &commit1, kindLotusDone: &done} {
		q, err := e.Signer.Query(kind, order, exp)
		if err != nil {
			return "", "", err
		}
		*out = strings.TrimSuffix(base, "/") + LotusRoutePrefix + strings.TrimPrefix(kind, "lotus-") + "?" + q.Encode()
	}
	return commit1, done, nil
}

// Handler serves POST commit1 and POST done.
func (e *LotusEndpoints) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+LotusRoutePrefix+"commit1", e.commit1)
	mux.HandleFunc("POST "+LotusRoutePrefix+"done", e.done)
	return mux
}

// order reads the signed order and its batch.
func (e *LotusEndpoints) order(w http.ResponseWriter, r *http.Request, kind string) (*sealv1.SealOrder, *sealv1.SealBatch, bool) {
	name, err := e.Signer.Verify(kind, r.URL.Query(), e.now())
	if err != nil {
		http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
		return nil, nil, false
	}
	var o sealv1.SealOrder
	if err := e.Client.Get(r.Context(), client.ObjectKey{Namespace: e.Namespace, Name: name}, &o); err != nil {
		if apierrors.IsNotFound(err) {
			http.Error(w, fmt.Sprintf("sector %s is not held by sealfleet any more (cleaned up)", name), http.StatusGone)
		} else {
			http.Error(w, "reading the order: "+err.Error(), http.StatusServiceUnavailable)
		}
		return nil, nil, false
	}
	var b sealv1.SealBatch
	if err := e.Client.Get(r.Context(), client.ObjectKey{Namespace: o.Namespace, Name: o.Status.Batch}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			http.Error(w, fmt.Sprintf("the batch that sealed sector %s is gone", name), http.StatusGone)
		} else {
			http.Error(w, "reading the batch: "+err.Error(), http.StatusServiceUnavailable)
		}
		return nil, nil, false
	}
	return &o, &b, true
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(v); err != nil {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// commit1 checks lotus' request against the sector sealfleet sealed, hands the seed to the
// batch (through the order, as a partner's commit1 does; the batch runs C1 for it at once),
// holds the call until that sector's C1 output is written and redirects to it on the node;
// past Wait, 503, which lotus retries. A sector given up is refused (410).
func (e *LotusEndpoints) commit1(w http.ResponseWriter, r *http.Request) {
	o, b, ok := e.order(w, r, kindLotusCommit1)
	if !ok {
		return
	}
	var p lotusreceive.RemoteCommit1Params
	if !decode(w, r, &p) {
		return
	}
	if msg := commit1Mismatch(o, b, p); msg != "" {
		e.event(b, true, "LotusCommit1Refused", fmt.Sprintf("%s: commit1 for sector %d refused: %s", o.Spec.Partner, o.Spec.SectorNumber, msg))
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	if gaveUp(o, b) {
		msg := fmt.Sprintf("sector %d was given up (lotus' done notice or the cleanup timeout): its files are deleted, so it has no C1", o.Spec.SectorNumber)
		e.event(b, true, "LotusCommit1Refused", o.Spec.Partner+": "+msg)
		http.Error(w, msg, http.StatusGone)
		return
	}
	seed := hex.EncodeToString(p.Seed)
	if given := seedOf(b, o.Spec.SectorNumber); given != "" && !strings.EqualFold(given, seed) {
		msg := fmt.Sprintf("sector %d already has another seed in spec.seeds of batch %s; C1 ran (or runs) with it", o.Spec.SectorNumber, b.Name)
		e.event(b, true, "LotusCommit1Refused", o.Spec.Partner+": "+msg)
		http.Error(w, msg, http.StatusConflict)
		return
	}
	switch {
	case o.Spec.Seed == nil:
		patch := client.MergeFrom(o.DeepCopy())
		o.Spec.Seed = &sealv1.OrderSeed{Randomness: seed}
		if err := e.Client.Patch(r.Context(), o, patch); err != nil {
			http.Error(w, "recording the seed: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	case !strings.EqualFold(o.Spec.Seed.Randomness, seed):
		http.Error(w, "a different seed was already given for this sector; a sector has one interactive seed", http.StatusConflict)
		return
	}
	if err := awaitC1(r.Context(), readerOr(e.Fresh, e.Client), b, o.Spec.SectorNumber, e.now().Add(e.Wait), e.now); err != nil {
		if r.Context().Err() == nil {
			http.Error(w, "reading the batch: "+err.Error(), http.StatusServiceUnavailable)
		}
		return
	}
	n := o.Spec.SectorNumber
	switch sectorState(b, n) {
	case "C1Written":
		u, err := e.Data.Commit1(r.Context(), b, n)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, u, http.StatusSeeOther)
		return
	case "SeedMissing":
		http.Error(w, fmt.Sprintf("sector %d: its seed came after batch %s stopped waiting (spec.seedTimeout): its layers are gone and it cannot be committed", n, b.Name), http.StatusGone)
		return
	case "C1Failed":
		http.Error(w, fmt.Sprintf("sector %d: C1 failed: %s", n, sectorReason(b, n)), http.StatusGone)
		return
	}
	if gaveUp(o, b) { // given up while the call was held
		http.Error(w, fmt.Sprintf("sector %d was given up while its commit1 was held: its files are deleted, so it has no C1", n), http.StatusGone)
		return
	}
	if b.Status.Phase == sealv1.PhaseFailed {
		http.Error(w, fmt.Sprintf("batch %s failed before C1 of sector %d", b.Name, n), http.StatusGone)
		return
	}
	w.Header().Set("Retry-After", "60")
	http.Error(w, fmt.Sprintf("C1 of sector %d is not written yet (batch %s is %s); call again", n, b.Name, b.Status.Phase), http.StatusServiceUnavailable)
}

// commit1Mismatch says what in lotus' C1 request is not the sector sealfleet sealed ("" when
// it is): its proof, CIDs and ticket.
func commit1Mismatch(o *sealv1.SealOrder, b *sealv1.SealBatch, p lotusreceive.RemoteCommit1Params) string {
	if want := v0.RegisteredSealProof(o.Spec.SectorSize, o.Spec.ProofType); p.ProofType != int64(want) {
		return fmt.Sprintf("proof type %d, the sector is %d", p.ProofType, want)
	}
	if p.Unsealed.Str != o.Status.CommDCID || p.Sealed.Str != o.Status.CommRCID {
		return fmt.Sprintf("CIDs %s/%s, the sector's are %s/%s", p.Unsealed.Str, p.Sealed.Str, o.Status.CommDCID, o.Status.CommRCID)
	}
	if len(p.Seed) != 32 {
		return fmt.Sprintf("seed of %d bytes, want 32", len(p.Seed))
	}
	i := slices.IndexFunc(b.Spec.Sectors, func(s sealv1.SectorSpec) bool { return s.Number == o.Spec.SectorNumber })
	if i < 0 {
		return fmt.Sprintf("batch %s does not seal sector %d", b.Name, o.Spec.SectorNumber)
	}
	t, err := render.Bytes32("ticket", b.Spec.Sectors[i].Ticket)
	if err != nil || !bytes.Equal(p.Ticket, t[:]) {
		return "the ticket is not the one the sector was sealed with"
	}
	return ""
}

// gaveUp: the sector's owner gave it up (cleanup asked, or the batch told), so no C1 runs
// for it and its files go.
func gaveUp(o *sealv1.SealOrder, b *sealv1.SealBatch) bool {
	return o.Spec.Cleanup || slices.Contains(b.Spec.AbandonedSectors, o.Spec.SectorNumber)
}

func seedOf(b *sealv1.SealBatch, sector int64) string {
	for _, s := range b.Spec.Seeds {
		if s.Number == sector {
			if t, err := render.Bytes32("seed", s.Randomness); err == nil {
				return hex.EncodeToString(t[:])
			}
		}
	}
	return ""
}

// done records that the sector left lotus' pipeline: lotus has taken its files (it fetched
// them before precommitting), so the order is finalized and cleaned up, which deletes the
// sector's outputs. Unknown orders succeed (a repeated call). lotus sends this once and does
// not retry: one lost (the API server unreachable) leaves the outputs to the cleanup timeout.
func (e *LotusEndpoints) done(w http.ResponseWriter, r *http.Request) {
	name, err := e.Signer.Verify(kindLotusDone, r.URL.Query(), e.now())
	if err != nil {
		http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	var gone sealv1.SealOrder
	if err := e.Client.Get(r.Context(), client.ObjectKey{Namespace: e.Namespace, Name: name}, &gone); apierrors.IsNotFound(err) {
		w.WriteHeader(http.StatusOK) // lotus calls once; a repeat finds the sector cleaned up
		return
	}
	o, b, ok := e.order(w, r, kindLotusDone)
	if !ok {
		return
	}
	var p lotusreceive.RemoteSealingDoneParams
	if !decode(w, r, &p) {
		return
	}
	msg := fmt.Sprintf("%s: sector %d left lotus' sealing pipeline in state %s", o.Spec.Partner, o.Spec.SectorNumber, p.State)
	if p.CommitMessage != nil {
		msg += ", commit message " + p.CommitMessage.Str
	}
	if p.Successful {
		e.event(b, false, "LotusSealingDone", msg+"; deleting its outputs")
	} else {
		e.event(b, true, "LotusSealingFailed", msg+" (unsuccessful); deleting its outputs: lotus will not fetch them again")
	}
	if !o.Spec.Cleanup {
		patch := client.MergeFrom(o.DeepCopy())
		o.Spec.Finalized, o.Spec.Cleanup = true, true
		if err := e.Client.Patch(r.Context(), o, patch); err != nil {
			http.Error(w, "recording it: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

func (e *LotusEndpoints) event(b *sealv1.SealBatch, warning bool, reason, msg string) {
	if e.Event != nil {
		e.Event(b, warning, reason, msg)
	}
}

// HandoffProblem says why the batch's spec.handoff cannot be honoured by this provider ("" when
// it can): the lotus-miner Secret, the miner, the namespace and the output the nodes serve.
func HandoffProblem(ctx context.Context, c client.Reader, b *sealv1.SealBatch, partnerNS, orderNS, servedOutput string) (string, error) {
	h := b.Spec.Handoff
	if h == nil {
		return "", nil
	}
	if b.Namespace != orderNS {
		return fmt.Sprintf("spec.handoff: batches handed to lotus live in the remote-seal namespace %s (their sectors' orders are there); create the batch there", orderNS), nil
	}
	if b.Spec.Output == nil || b.Spec.Output.HostPath == nil || b.Spec.Output.HostPath.Path != servedOutput {
		return fmt.Sprintf("spec.output.hostPath.path: the node agents serve sector files to lotus from %s; write the batch there", servedOutput), nil
	}
	var s corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: partnerNS, Name: h.LotusMiner}, &s)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("spec.handoff.lotusMiner: no Secret %s/%s; an admin creates it (label %s=true, keys %s, %s, %s)", partnerNS, h.LotusMiner, LabelLotusMiner, KeyAPIURL, KeyToken, KeyMinerID), nil
	}
	if err != nil {
		return "", err
	}
	m, err := ParseLotusMiner(&s)
	if err != nil {
		return "spec.handoff.lotusMiner: " + err.Error(), nil
	}
	if m.MinerID != b.Spec.MinerID {
		return fmt.Sprintf("spec.minerID %s: lotus-miner %s is miner %s; a miner takes only its own sectors", b.Spec.MinerID, m.Name, m.MinerID), nil
	}
	return "", nil
}

// ErrNoHandoff: this operator hands no sectors to lotus (no remote-seal provider, or no
// public URL lotus could call back).
var ErrNoHandoff = errors.New("spec.handoff: this sealfleet hands no sectors to lotus: enable the remote-seal provider with a public URL lotus reaches it at (chart remoteSeal.enabled and remoteSeal.publicURL)")

// Labelled reports whether the order belongs to a batch handed to lotus.
func Labelled(o *sealv1.SealOrder) bool { return o.Labels[orders.LabelHandoff] != "" }
