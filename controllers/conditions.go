package controllers

import "github.com/sealfleet/sealfleet/internal/ledger"

// Condition types on a SealBatch.
const (
	CondPlaced      = "Placed"
	CondPC1Complete = "PC1Complete"
	CondPC2Complete = "PC2Complete"
	// CondC1Complete: the operator's C1 from the slot (spec.commit1 FromSlot) wrote the
	// sectors' commit-phase1-output; CondSeedsMissing names sectors whose seeds never came.
	CondC1Complete   = "C1Complete"
	CondSeedsMissing = "SeedsMissing"
	// CondUpdated is an update's (spec.update) in place of PC1Complete and PC2Complete.
	CondUpdated           = "Updated"
	CondFailed            = "Failed"
	CondReleased          = ledger.CondReleased // ends the batch's hold on its slot
	CondDeletionIsBlocked = "DeletionIsBlocked"
	// CondPodCreationRefused: the API server refused an object the batch's run needs (its
	// sealer or C1 pod, ConfigMap or disruption budget): a quota, Pod Security admission, a
	// webhook or RBAC. True while refused; False once the pod is created.
	CondPodCreationRefused = "PodCreationRefused"
)

// Reason is a typed condition reason (CamelCase, stable: alerts and users match on them).
type Reason string

// Reasons.
const (
	ReasonPlaced        Reason = "Placed"
	ReasonUnschedulable Reason = "Unschedulable"
	ReasonInvalidSpec   Reason = "InvalidSpec"
	ReasonLabelling     Reason = "Labelling"
	ReasonLayersWritten Reason = "LayersWritten"
	ReasonTreesBuilding Reason = "TreesBuilding"
	ReasonCommitted     Reason = "CommitmentsComputed"
	// ReasonEncoding and ReasonEncoded: an update's sealer is encoding, or has written
	// every sector's updated replica and comm_r_new.
	ReasonEncoding Reason = "Encoding"
	ReasonEncoded  Reason = "Encoded"
	// ReasonWaitingForSeeds, ReasonC1Running, ReasonC1Written and ReasonSeedTimeout: C1 from
	// the slot waits for spec.seeds, runs, has written its outputs, or gave up on sectors
	// whose seeds did not come within spec.seedTimeout.
	ReasonWaitingForSeeds Reason = "WaitingForSeeds"
	ReasonC1Running       Reason = "ReadingSlot"
	ReasonC1Written       Reason = "C1OutputWritten"
	ReasonSeedTimeout     Reason = "SeedTimeout"
	ReasonSealerFailed    Reason = "SealerFailed"
	// ReasonDataMismatch: a data sector's staged file or commD does not match its pieces
	// (the message names the sector and both commitments); never retried.
	ReasonDataMismatch Reason = "DataMismatch"
	// ReasonGPUFailed: pc2Engine gpu found no usable device, or the device failed (lost, out
	// of memory); the message names the device. Retried; PC2 resumes from its checkpoint.
	ReasonGPUFailed      Reason = "GPUFailed"
	ReasonPodEvicted     Reason = "PodEvicted"
	ReasonPodDisappeared Reason = "PodDisappeared"
	ReasonNodeLost       Reason = "NodeLost"
	ReasonRetrying       Reason = "Retrying"
	ReasonSlotReleased   Reason = "SlotReleased"
	ReasonReleaseFailed  Reason = "ReleaseFailed"
	ReasonForcedRelease  Reason = "ForcedRelease"
	// ReasonSlotLeftToScrub: the release recorded the slot dirty on the SealerNode.
	ReasonSlotLeftToScrub Reason = "SlotLeftToScrub"
	ReasonWaitingForPod   Reason = "WaitingForPodDeletion"
	// Why the API server refused an object (CondPodCreationRefused), and that it stopped.
	ReasonQuotaExceeded  Reason = "QuotaExceeded"
	ReasonPodSecurity    Reason = "PodSecurityRefused"
	ReasonWebhookRefused Reason = "AdmissionWebhookRefused"
	ReasonForbidden      Reason = "Forbidden"
	ReasonObjectInvalid  Reason = "ObjectInvalid"
	ReasonPodCreated     Reason = "PodCreated"
	// ReasonOutputOwned: the output directory belongs to another batch (another UID).
	ReasonOutputOwned Reason = "OutputOwnedByAnotherBatch"
	// ReasonPodUnschedulable: kube-scheduler cannot bind the pod to the batch's node yet.
	ReasonPodUnschedulable Reason = "PodUnschedulable"
)

// Finalizer guarantees that a deleted batch gives back its slot.
const Finalizer = "sealfleet.io/release"

// AnnotationForceRelease on a SealBatch gives its slot back without a scrub (no dirty-slot
// record): for an admin who knows the slot holds nothing worth discarding. It never frees a
// slot a sealer may still write: the pod must be gone, or its node gone or tainted
// out-of-service.
const AnnotationForceRelease = "sealfleet.io/force-release"
