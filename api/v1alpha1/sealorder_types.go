package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SealOrderSpec is one CC sector a remote-seal partner (a storage provider's Curio) ordered:
// sealfleet seals it under the partner's miner and sector number, with seal randomness drawn
// from the partner's chain, and hands the replica, the cache and C1 back through the protocol.
// Orders queue until a batch can be formed; the batch is an ordinary SealBatch.
// +kubebuilder:validation:XValidation:rule="self.proofType in ['V1_1', 'V1_1_Feat_SyntheticPoRep']",fieldPath=".proofType",message="spec.proofType: delegated remote seal orders are CC sectors with interactive (V1_1) or synthetic (V1_1_Feat_SyntheticPoRep) PoRep; V1 and NI-PoRep are not part of the protocol"
type SealOrderSpec struct {
	// partner names the remote-seal partner (its Secret) that placed the order.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Partner string `json:"partner"`

	// minerID is the partner's miner actor (f0… or t0…): the prover id of the replica.
	// +kubebuilder:validation:Pattern=`^[ft]0(0|[1-9][0-9]{0,18})$`
	// +kubebuilder:validation:MaxLength=21
	// +required
	MinerID string `json:"minerID"`

	// sectorNumber is the sector number the partner's miner allocated.
	// +kubebuilder:validation:Minimum=0
	// +required
	SectorNumber int64 `json:"sectorNumber"`

	// sectorSize and proofType name the order's RegisteredSealProof.
	// +required
	SectorSize SectorSize `json:"sectorSize"`
	// +required
	ProofType ProofType `json:"proofType"`

	// seed is the interactive PoRep seed the partner sent with commit1.
	// +optional
	Seed *OrderSeed `json:"seed,omitempty"`

	// finalized records the partner's finalize (it needs the layers no more). The batch's slot
	// is released when the batch completes (after C1 from the slot, or the synthetic proofs),
	// finalized or not; the outputs stay until cleanup.
	// +optional
	Finalized bool `json:"finalized,omitempty"`

	// cleanup says the partner needs nothing more (cleanup): the sector's outputs are deleted.
	// +optional
	Cleanup bool `json:"cleanup,omitempty"`
}

// OrderSeed is a sector's interactive seed; its epoch is not part of Curio's request.
type OrderSeed struct {
	// randomness is the 32-byte seed as 64 hex characters.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +required
	Randomness string `json:"randomness"`
}

// OrderState is the protocol's view of an order.
// +kubebuilder:validation:Enum=pending;sdr;trees;complete;failed;gone
type OrderState string

// The states of an order, as the protocol's status call reports them.
const (
	OrderPending  OrderState = "pending"
	OrderSDR      OrderState = "sdr"
	OrderTrees    OrderState = "trees"
	OrderComplete OrderState = "complete"
	OrderFailed   OrderState = "failed"
	OrderGone     OrderState = "gone"
)

// OrderTicket is the seal randomness drawn from the partner's chain for the order.
type OrderTicket struct {
	// randomness is the 32-byte ticket as 64 hex characters.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	Randomness string `json:"randomness"`
	// epoch is the chain epoch the ticket was drawn at.
	// +kubebuilder:validation:Minimum=0
	Epoch int64 `json:"epoch"`
	// fetchTime is when sealfleet fetched it (the partner must precommit within about a day).
	FetchTime metav1.Time `json:"fetchTime"`
}

// SealOrderStatus is what sealfleet did with the order.
type SealOrderStatus struct {
	// state is the protocol state the partner sees.
	// +optional
	State OrderState `json:"state,omitempty"`
	// ticket is the seal randomness the batch seals the sector with.
	// +optional
	Ticket *OrderTicket `json:"ticket,omitempty"`
	// batch is the SealBatch (in this namespace) sealing the sector.
	// +optional
	Batch string `json:"batch,omitempty"`
	// commDCID and commRCID are the unsealed and sealed CIDs once complete.
	// +optional
	CommDCID string `json:"commDCID,omitempty"`
	// +optional
	CommRCID string `json:"commRCID,omitempty"`
	// failReason says why the order failed, for the partner.
	// +optional
	FailReason string `json:"failReason,omitempty"`
	// seedTime is when the partner's seed was handed to the batch; c1Time when the batch
	// wrote the sector's C1 output (their difference is the C1 latency the partner waits).
	// +optional
	SeedTime *metav1.Time `json:"seedTime,omitempty"`
	// +optional
	C1Time *metav1.Time `json:"c1Time,omitempty"`
	// completeTime is when the order became complete (the cleanup timeout counts from it).
	// +optional
	CompleteTime *metav1.Time `json:"completeTime,omitempty"`
	// notifiedTime is when the partner accepted the complete notice (unset until then).
	// +optional
	NotifiedTime *metav1.Time `json:"notifiedTime,omitempty"`
	// notifyAttempts counts complete notices the partner did not accept; lastNotifyTime is
	// the last one (the next waits a back-off after it).
	// +optional
	NotifyAttempts int32 `json:"notifyAttempts,omitempty"`
	// +optional
	LastNotifyTime *metav1.Time `json:"lastNotifyTime,omitempty"`
	// conditions are the order's conditions.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SealOrder is a sector a remote-seal partner ordered; it waits in the queue until a batch is
// formed, then follows the batch. The provider names it <minerID>-<sectorNumber>, so a sector
// has one order (an order named otherwise is refused by the order controller).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=so,categories=sealfleet
// +kubebuilder:printcolumn:name="Partner",type=string,JSONPath=`.spec.partner`
// +kubebuilder:printcolumn:name="Miner",type=string,JSONPath=`.spec.minerID`
// +kubebuilder:printcolumn:name="Sector",type=integer,JSONPath=`.spec.sectorNumber`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.sectorSize`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Batch",type=string,JSONPath=`.status.batch`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec) || (self.spec.partner == oldSelf.spec.partner && self.spec.minerID == oldSelf.spec.minerID && self.spec.sectorNumber == oldSelf.spec.sectorNumber && self.spec.sectorSize == oldSelf.spec.sectorSize && self.spec.proofType == oldSelf.spec.proofType)",message="spec.partner, minerID, sectorNumber, sectorSize and proofType cannot change: an order is for one sector of one partner"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.seed) || (has(self.spec.seed) && self.spec.seed == oldSelf.spec.seed)",message="spec.seed cannot change once given: a sector has one interactive seed"
type SealOrder struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SealOrderSpec   `json:"spec,omitempty"`
	Status SealOrderStatus `json:"status,omitempty"`
}

// SealOrderList is a list of SealOrders.
// +kubebuilder:object:root=true
type SealOrderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SealOrder `json:"items"`
}
