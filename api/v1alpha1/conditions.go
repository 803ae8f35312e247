package v1alpha1

// The condition types and reasons of both kinds, declared once: the operator, the node agent,
// placement and the kubectl plugin all use these.

// Condition types on a SealBatch.
const (
	CondPlaced      = "Placed"
	CondPC1Complete = "PC1Complete"
	CondPC2Complete = "PC2Complete"
	// CondC1Complete: the operator's C1 from the slot (spec.commit1 FromSlot) wrote the
	// sectors' commit-phase1-output; CondSeedsMissing names sectors whose seeds never came.
	CondC1Complete   = "C1Complete"
	CondSeedsMissing = "SeedsMissing"
	// CondSectorsFailed: the sealer left sectors out of the batch (a check of their own
	// failed: data file, pieces, commD, output directory) and sealed the others; the message
	// counts and names them, status.sectors[].reason says why each.
	CondSectorsFailed = "SectorsFailed"
	// CondUpdated is an update's (spec.update) in place of PC1Complete and PC2Complete.
	CondUpdated           = "Updated"
	CondFailed            = "Failed"
	CondReleased          = "Released" // ends the batch's hold on its slot
	CondDeletionIsBlocked = "DeletionIsBlocked"
	// CondPodCreationRefused: the API server refused an object the batch's run needs (its
	// sealer or C1 pod, ConfigMap or disruption budget): a quota, Pod Security admission, a
	// webhook or RBAC. True while refused; False once the pod is created.
	CondPodCreationRefused = "PodCreationRefused"
)

// Reason is a typed SealBatch condition or event reason (CamelCase, stable: alerts and
// users match on them).
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
	// ReasonC1FromProofs: a SyntheticPoRep batch's C1 on request reads the seeded sectors'
	// stored synthetic proofs (no slot).
	ReasonC1FromProofs Reason = "ReadingSyntheticProofs"
	ReasonSealerFailed Reason = "SealerFailed"
	// ReasonDataMismatch: a data sector's staged file or commD does not match its pieces
	// (the message names the sector and both commitments); never retried.
	ReasonDataMismatch Reason = "DataMismatch"
	// ReasonSectorChecksFailed: some sectors failed their own checks before PC1; the batch
	// sealed the rest (condition SectorsFailed).
	ReasonSectorChecksFailed Reason = "SectorChecksFailed"
	// ReasonAudit: a sealed or updated sector's outputs failed the audit every sector answers
	// before it leaves the sealer (WindowPoSt vanilla proofs, spot checks of labels, replica and
	// tree-c): its files were deleted and it is never handed off (condition SectorsFailed).
	ReasonAudit Reason = "Audit"
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
	// Scrub events on the SealerNode.
	ReasonSlotScrubbed Reason = "SlotScrubbed"
	ReasonScrubFailed  Reason = "ScrubFailed"
	ReasonScrubSkipped Reason = "ScrubSkipped"
)

// SealerNode condition types (the node agent owns them).
const (
	CondReady           = "Ready"
	CondDegraded        = "Degraded"
	CondHugepagesShort  = "HugepagesShort"
	CondDevicesNotReady = "DevicesNotReady"
)

// SealerNode condition reasons.
const (
	NodeReasonReady              = "Ready"
	NodeReasonNoSHANI            = "NoSHANI"
	NodeReasonNoBatchSize        = "NoSupportedBatchSize"
	NodeReasonDevicesNotReady    = "DevicesNotReady"
	NodeReasonHugepagesShort     = "HugepagesShort"
	NodeReasonAsExpected         = "AsExpected"
	NodeReasonPrepareFailed      = "PrepareFailed"
	NodeReasonInvalidSpec        = "InvalidSpec"
	NodeReasonBelowTarget        = "BelowTarget"
	NodeReasonAtTarget           = "AtTarget"
	NodeReasonNoTarget           = "NoTarget"
	NodeReasonDeviceRefused      = "DeviceRefused"
	NodeReasonAllDevicesReady    = "AllDevicesReady"
	NodeReasonNoDevices          = "NoLayerDevices"
	NodeReasonDryRun             = "DryRun"
	NodeReasonKubeletReservesCPU = "KubeletReservesMoreCPUs"
	// NodeReasonParentCacheDirNotVisible is the Degraded reason when the node's parent-cache
	// directory is not mounted into the agent: it cannot report any cache there, so no batch
	// that needs one can be placed on the node.
	NodeReasonParentCacheDirNotVisible = "ParentCacheDirNotVisible"
)

// SealerNode event reasons of its qualification.
const (
	NodeReasonQualifying          = "Qualifying"
	NodeReasonQualified           = "Qualified"
	NodeReasonQualificationFailed = "QualificationFailed"
)
