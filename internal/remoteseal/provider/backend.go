package provider

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/placement"
	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/orders"
)

// ErrDataNotServed: no node serves sector data yet (Backend.Data is nil).
var ErrDataNotServed = errors.New("sector data is not served by this provider: no node data server is configured")

// DataLocator hands out where a node serves a sector's bytes (signed, short-lived URLs).
type DataLocator interface {
	Sealed(ctx context.Context, b *sealv1.SealBatch, sector int64) (string, error)
	Cache(ctx context.Context, b *sealv1.SealBatch, sector int64) (string, error)
	Commit1(ctx context.Context, b *sealv1.SealBatch, sector int64) (string, error)
}

// Backend answers the protocol from Kubernetes objects: partner Secrets in Namespace,
// SealOrders and their SealBatches in OrderNamespace.
type Backend struct {
	Client         client.Client
	Namespace      string
	OrderNamespace string
	// MinerPrefix is the network's ID-address prefix of miners, f0 (mainnet) or t0.
	MinerPrefix string
	// Data locates sector bytes on nodes; nil refuses the data routes with ErrDataNotServed.
	Data DataLocator
	// Problem reports partner Secrets that do not parse (never with a token).
	Problem func(error)
	// Wait is how long a commit1 call is held for its sector's C1 output before the sector is
	// reported not ready (412; 0: not held).
	Wait time.Duration
	// Fresh reads from the API server (nil: Client) where the manager's cache, seconds behind
	// under load, would answer wrongly: a held call's batch at the end of its hold, and an
	// order or batch the cache does not have yet (it must not read as deleted).
	Fresh client.Reader
	Now   func() time.Time
}

func (b *Backend) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

var _ v0.Backend = (*Backend)(nil)

// sealedProofs are the proof types delegated orders are taken for: V1_1 (C1 from the slot once
// the partner's commit1 brings the seed) and SyntheticPoRep (the slot goes once the synthetic
// proofs are written; commit1's C1 reads them on the node).
var sealedProofs = []sealv1.ProofType{sealv1.ProofTypeV1_1, sealv1.ProofTypeSyntheticPoRep}

func (b *Backend) partners(ctx context.Context) ([]corev1.Secret, error) {
	var list corev1.SecretList
	if err := b.Client.List(ctx, &list, client.InNamespace(b.Namespace), client.HasLabels{LabelPartner}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (b *Backend) partner(ctx context.Context, name string) (Partner, error) {
	var s corev1.Secret
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return Partner{}, v0.ErrUnauthorized // removed since it authenticated
		}
		return Partner{}, err
	}
	return ParsePartner(&s)
}

// Authenticate finds the partner Secret holding token.
func (b *Backend) Authenticate(ctx context.Context, token string) (v0.Partner, error) {
	secrets, err := b.partners(ctx)
	if err != nil {
		return v0.Partner{}, err
	}
	p, ok, problems := Find(secrets, token)
	for _, e := range problems {
		if b.Problem != nil {
			b.Problem(e)
		}
	}
	if !ok {
		return v0.Partner{}, v0.ErrUnauthorized
	}
	inFlight, err := b.inFlight(ctx, p.Name)
	if err != nil {
		return v0.Partner{}, err
	}
	return v0.Partner{ID: p.Name, Name: p.Name, AllowanceRemaining: max(0, p.MaxSectors-inFlight)}, nil
}

// Capabilities: the proofs delegated orders are sealed with, at every size the sealer runs.
func (b *Backend) Capabilities(context.Context) (v0.CapabilitiesResponse, error) {
	c := v0.CapabilitiesResponse{MaxBatchSize: sealv1.SupportedBatchSizes[len(sealv1.SupportedBatchSizes)-1], SupportsRangeRequests: true}
	for _, proof := range sealedProofs {
		for _, size := range []sealv1.SectorSize{sealv1.SectorSize2KiB, sealv1.SectorSize8MiB, sealv1.SectorSize512MiB, sealv1.SectorSize32GiB, sealv1.SectorSize64GiB} {
			c.SupportedProofs = append(c.SupportedProofs, int64(v0.RegisteredSealProof(size, proof)))
		}
	}
	return c, nil
}

// inFlight counts the partner's orders not cleaned up.
func (b *Backend) inFlight(ctx context.Context, partner string) (int64, error) {
	var list sealv1.SealOrderList
	if err := b.Client.List(ctx, &list, client.InNamespace(b.OrderNamespace), client.MatchingLabels{orders.LabelPartner: partner}); err != nil {
		return 0, err
	}
	var n int64
	for _, o := range list.Items {
		if !o.Spec.Cleanup {
			n++
		}
	}
	return n, nil
}

// Capacity is the partner's sectors in flight below its maxSectors.
func (b *Backend) Capacity(ctx context.Context, vp v0.Partner) (int64, error) {
	p, err := b.partner(ctx, vp.ID)
	if err != nil {
		return 0, err
	}
	n, err := b.inFlight(ctx, p.Name)
	return p.MaxSectors - n, err
}

func (b *Backend) minerID(spID int64) string { return fmt.Sprintf("%s%d", b.MinerPrefix, spID) }

// Order records a SealOrder for the sector, once: a repeat by the same partner with the same
// proof type is accepted again; anything else that names an ordered or sealing sector is
// refused with the reason.
func (b *Backend) Order(ctx context.Context, vp v0.Partner, s v0.SectorID, regSealProof int, reserved bool) error {
	p, err := b.partner(ctx, vp.ID)
	if err != nil {
		return err
	}
	size, proof, err := v0.ProofOf(regSealProof)
	if err != nil {
		return &v0.Rejection{Reason: err.Error()}
	}
	if !containsProof(proof) {
		return &v0.Rejection{Reason: fmt.Sprintf("reg_seal_proof %d (%s) is not taken for delegated orders: only V1_1 (reg_seal_proof 5-9) and V1_1_Feat_SyntheticPoRep (10-14)", regSealProof, sealv1.RegisteredProof(size, proof))}
	}
	if !p.Allows(regSealProof) {
		return &v0.Rejection{Reason: fmt.Sprintf("proof type %d not allowed for this partner", regSealProof)}
	}
	miner := b.minerID(s.SpID)
	name := orders.Name(miner, s.Number)
	var existing sealv1.SealOrder
	err = b.Client.Get(ctx, client.ObjectKey{Namespace: b.OrderNamespace, Name: name}, &existing)
	switch {
	case err == nil:
		return sameOrder(&existing, p.Name, size, proof)
	case !apierrors.IsNotFound(err):
		return err
	}
	var batches sealv1.SealBatchList
	if err := b.Client.List(ctx, &batches); err != nil {
		return err
	}
	if other := placement.SealingBatch(batches.Items, miner, s.Number); other != nil {
		return &v0.Rejection{Reason: fmt.Sprintf("sector %d of %s is already sealed by batch %s/%s", s.Number, miner, other.Namespace, other.Name)}
	}
	if !reserved {
		n, err := b.inFlight(ctx, p.Name)
		if err != nil {
			return err
		}
		if n >= p.MaxSectors {
			return &v0.Rejection{Reason: fmt.Sprintf("no capacity: %d of %d sectors in flight; call available first", n, p.MaxSectors)}
		}
	}
	o := &sealv1.SealOrder{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.OrderNamespace, Labels: map[string]string{orders.LabelPartner: p.Name}},
		Spec:       sealv1.SealOrderSpec{Partner: p.Name, MinerID: miner, SectorNumber: s.Number, SectorSize: size, ProofType: proof},
	}
	err = b.Client.Create(ctx, o)
	if apierrors.IsAlreadyExists(err) { // a concurrent repeat of the same order
		if err := b.Client.Get(ctx, client.ObjectKeyFromObject(o), &existing); err != nil {
			return err
		}
		return sameOrder(&existing, p.Name, size, proof)
	}
	return err
}

func containsProof(p sealv1.ProofType) bool {
	for _, q := range sealedProofs {
		if q == p {
			return true
		}
	}
	return false
}

// sameOrder accepts a repeat of an order and refuses anything else for its sector.
func sameOrder(o *sealv1.SealOrder, partner string, size sealv1.SectorSize, proof sealv1.ProofType) error {
	switch {
	case o.Spec.Partner != partner:
		return &v0.Rejection{Reason: fmt.Sprintf("sector %d of %s is already ordered by another partner", o.Spec.SectorNumber, o.Spec.MinerID)}
	case o.Spec.SectorSize != size || o.Spec.ProofType != proof:
		return &v0.Rejection{Reason: fmt.Sprintf("sector %d of %s is already ordered as %s", o.Spec.SectorNumber, o.Spec.MinerID, sealv1.RegisteredProof(o.Spec.SectorSize, o.Spec.ProofType))}
	}
	return nil
}

// order reads the partner's order for s; nil when there is none (or another partner's).
func (b *Backend) order(ctx context.Context, vp v0.Partner, s v0.SectorID) (*sealv1.SealOrder, error) {
	var o sealv1.SealOrder
	key := client.ObjectKey{Namespace: b.OrderNamespace, Name: orders.Name(b.minerID(s.SpID), s.Number)}
	err := b.Client.Get(ctx, key, &o)
	if apierrors.IsNotFound(err) && b.Fresh != nil {
		// An order created a moment ago may not be in the cache yet: a partner asking for its
		// status right after delegating must not read it as gone.
		err = b.Fresh.Get(ctx, key, &o)
	}
	if apierrors.IsNotFound(err) || err == nil && o.Spec.Partner != vp.ID {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// batchOf reads the order's batch; nil when it has none or it is gone.
func (b *Backend) batchOf(ctx context.Context, o *sealv1.SealOrder) (*sealv1.SealBatch, error) {
	if o.Status.Batch == "" {
		return nil, nil
	}
	var sb sealv1.SealBatch
	key := client.ObjectKey{Namespace: o.Namespace, Name: o.Status.Batch}
	err := b.Client.Get(ctx, key, &sb)
	if apierrors.IsNotFound(err) && b.Fresh != nil {
		// The cache may not have the batch yet; only the API server says it is gone.
		err = b.Fresh.Get(ctx, key, &sb)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return &sb, err
}

// Status reports the order's state from its batch, with both CIDs and the ticket once
// complete; gone for a sector the partner never ordered (or that was cleaned up and deleted).
func (b *Backend) Status(ctx context.Context, vp v0.Partner, s v0.SectorID) (v0.StatusResponse, error) {
	o, err := b.order(ctx, vp, s)
	if err != nil || o == nil {
		return v0.StatusResponse{State: v0.StateGone}, err
	}
	sb, err := b.batchOf(ctx, o)
	if err != nil {
		return v0.StatusResponse{}, err
	}
	v := orders.StateOf(o, sb)
	st := v0.StatusResponse{State: string(v.State), FailReason: v.Reason}
	if v.State == sealv1.OrderComplete {
		if o.Status.Ticket == nil {
			return v0.StatusResponse{}, fmt.Errorf("order %s is complete without a ticket", o.Name)
		}
		ticket, err := hex.DecodeString(o.Status.Ticket.Randomness)
		if err != nil {
			return v0.StatusResponse{}, fmt.Errorf("order %s: ticket: %w", o.Name, err)
		}
		st.TreeDCid, st.TreeRCid, st.TicketEpoch, st.TicketValue = v.CommDCID, v.CommRCID, o.Status.Ticket.Epoch, ticket
	}
	return st, nil
}

// completeBatch is the order's batch once its sector is complete; ErrNotFound or ErrNotReady
// otherwise.
func (b *Backend) completeBatch(ctx context.Context, vp v0.Partner, s v0.SectorID) (*sealv1.SealOrder, *sealv1.SealBatch, error) {
	o, err := b.order(ctx, vp, s)
	if err != nil {
		return nil, nil, err
	}
	if o == nil || o.Spec.Cleanup {
		return nil, nil, v0.ErrNotFound
	}
	sb, err := b.batchOf(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	if sb == nil && o.Status.Batch == "" {
		return nil, nil, v0.ErrNotReady // queued
	}
	if sb == nil {
		return nil, nil, v0.ErrNotFound // its batch is gone
	}
	switch orders.StateOf(o, sb).State {
	case sealv1.OrderComplete:
	case sealv1.OrderFailed:
		return nil, nil, v0.ErrNotFound
	default:
		return nil, nil, v0.ErrNotReady
	}
	return o, sb, nil
}

func (b *Backend) locate(ctx context.Context, vp v0.Partner, s v0.SectorID, where func(DataLocator, context.Context, *sealv1.SealBatch, int64) (string, error)) (v0.Payload, error) {
	_, sb, err := b.completeBatch(ctx, vp, s)
	if err != nil {
		return v0.Payload{}, err
	}
	if b.Data == nil {
		return v0.Payload{}, ErrDataNotServed
	}
	u, err := where(b.Data, ctx, sb, s.Number)
	return v0.Payload{Redirect: u}, err
}

// SealedData redirects to the node holding the replica.
func (b *Backend) SealedData(ctx context.Context, vp v0.Partner, s v0.SectorID) (v0.Payload, error) {
	return b.locate(ctx, vp, s, DataLocator.Sealed)
}

// CacheData redirects to the node serving the finalized cache's tar.
func (b *Backend) CacheData(ctx context.Context, vp v0.Partner, s v0.SectorID) (v0.Payload, error) {
	return b.locate(ctx, vp, s, DataLocator.Cache)
}

// Commit1 records the seed on the order (the order controller hands it to the batch, whose
// C1 runs from the slot) and redirects to the C1 output once it is written; until then the
// sector is not ready (the client's PoRep task retries).
func (b *Backend) Commit1(ctx context.Context, vp v0.Partner, s v0.SectorID, seed []byte) (v0.Payload, error) {
	o, sb, err := b.completeBatch(ctx, vp, s)
	if err != nil {
		return v0.Payload{}, err
	}
	if gaveUp(o, sb) {
		return v0.Payload{}, &v0.Rejection{Reason: fmt.Sprintf("sector %d was given up (cleanup came before its commit1): its files are deleted, so it has no C1", s.Number)}
	}
	want := hex.EncodeToString(seed)
	switch {
	case o.Spec.Seed == nil:
		patch := client.MergeFrom(o.DeepCopy())
		o.Spec.Seed = &sealv1.OrderSeed{Randomness: want}
		if err := b.Client.Patch(ctx, o, patch); err != nil {
			return v0.Payload{}, err
		}
	case !strings.EqualFold(o.Spec.Seed.Randomness, want):
		return v0.Payload{}, &v0.Rejection{Reason: "a different seed was already given for this sector; a sector has one interactive seed"}
	}
	if b.Wait > 0 && (sb.Spec.FromSlot() || sb.Spec.ProofTypeOrDefault() == sealv1.ProofTypeSyntheticPoRep) {
		// Held until this sector's C1 output is written (C1 runs as soon as its seed is in),
		// so the client's first call usually gets it: Curio retries a 412 only ten times.
		if err := awaitC1(ctx, readerOr(b.Fresh, b.Client), sb, s.Number, b.now().Add(b.Wait), b.now); err != nil {
			return v0.Payload{}, err
		}
	}
	if gaveUp(o, sb) { // given up while the call was held
		return v0.Payload{}, &v0.Rejection{Reason: fmt.Sprintf("sector %d was given up while its commit1 was held: its files are deleted, so it has no C1", s.Number)}
	}
	if why := c1Failed(sb, s.Number); why != "" {
		return v0.Payload{}, &v0.Rejection{Reason: why}
	}
	if !c1Written(sb, s.Number) {
		return v0.Payload{}, v0.ErrNotReady
	}
	if b.Data == nil {
		return v0.Payload{}, ErrDataNotServed
	}
	u, err := b.Data.Commit1(ctx, sb, s.Number)
	return v0.Payload{Redirect: u}, err
}

// c1Failed is why the batch gave up the sector's C1 ("" when it has not): a SyntheticPoRep
// sector whose stored proofs gave no C1 output.
func c1Failed(sb *sealv1.SealBatch, sector int64) string {
	for _, st := range sb.Status.Sectors {
		if st.Number == sector && st.State == "SeedMissing" {
			return fmt.Sprintf("sector %d: its seed came after batch %s stopped waiting (seedTimeout): its layers are gone and it cannot be committed", sector, sb.Name)
		}
		if st.Number == sector && st.State == "C1Failed" {
			if st.Reason != "" {
				return st.Reason
			}
			if c := meta.FindStatusCondition(sb.Status.Conditions, sealv1.CondC1Complete); c != nil {
				return c.Message
			}
			return fmt.Sprintf("sector %d: C1 failed", sector)
		}
	}
	return ""
}

// c1Written: the batch wrote the sector's commit-phase1-output (C1 from the slot, or from a
// SyntheticPoRep sector's stored synthetic proofs once its seed came).
func c1Written(sb *sealv1.SealBatch, sector int64) bool {
	for _, st := range sb.Status.Sectors {
		if st.Number == sector && st.State == "C1Written" {
			return true
		}
	}
	return false
}

// Finalize marks the order finalized: once every order of its batch is, the batch's slot is
// released. Unknown sectors succeed, as the protocol wants.
func (b *Backend) Finalize(ctx context.Context, vp v0.Partner, s v0.SectorID) error {
	return b.mark(ctx, vp, s, func(spec *sealv1.SealOrderSpec) *bool { return &spec.Finalized })
}

// Cleanup marks the order for cleanup: its outputs may be deleted.
func (b *Backend) Cleanup(ctx context.Context, vp v0.Partner, s v0.SectorID) error {
	return b.mark(ctx, vp, s, func(spec *sealv1.SealOrderSpec) *bool { return &spec.Cleanup })
}

func (b *Backend) mark(ctx context.Context, vp v0.Partner, s v0.SectorID, field func(*sealv1.SealOrderSpec) *bool) error {
	o, err := b.order(ctx, vp, s)
	if err != nil || o == nil || *field(&o.Spec) {
		return err
	}
	patch := client.MergeFrom(o.DeepCopy())
	*field(&o.Spec) = true
	return client.IgnoreNotFound(b.Client.Patch(ctx, o, patch))
}
