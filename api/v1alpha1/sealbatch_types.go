package v1alpha1

import (
	"path"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SealBatchSpec is what the user asks for: N sectors of one size and proof type (committed
// capacity, or holding deal data), sealed together by one sealer pod on one node.
// +kubebuilder:validation:XValidation:rule="has(self.dataSource) || !self.sectors.exists(s, has(s.data))",fieldPath=".dataSource",message="spec.dataSource: sectors with data read their staged files from it; give a hostPath or persistentVolumeClaim holding them"
// +kubebuilder:validation:XValidation:rule="!has(self.dataSource) || self.sectors.exists(s, has(s.data))",fieldPath=".dataSource",message="spec.dataSource is only read for sectors with data; remove it, or give sectors their data"
// +kubebuilder:validation:XValidation:rule="self.sectors.all(s, !has(s.data) || s.data.pieces.map(p, p.size).sum() <= {'2KiB': 2048, '8MiB': 8388608, '512MiB': 536870912, '32GiB': 34359738368, '64GiB': 68719476736}[self.sectorSize])",fieldPath=".sectors",message="spec.sectors[].data.pieces: the pieces of a sector are larger than spec.sectorSize; move pieces to another sector"
// +kubebuilder:validation:XValidation:rule="has(self.update) || self.sectors.all(s, has(s.ticket))",fieldPath=".sectors",message="spec.sectors[].ticket: every sector sealed by the batch needs its ticket (32 bytes as 64 hex or 44 base64 characters)"
// +kubebuilder:validation:XValidation:rule="!has(self.update) || self.sectors.all(s, !has(s.ticket) && has(s.data))",fieldPath=".sectors",message="spec.sectors: every sector of an update (spec.update) needs its data (the staged file and pieces to encode) and no ticket (the sealed sector already carries its own); give data and remove ticket"
// +kubebuilder:validation:XValidation:rule="!has(self.gpus) || (has(self.pc2Engine) && self.pc2Engine == 'gpu')",fieldPath=".gpus",message="spec.gpus: only pc2Engine gpu uses GPUs; set pc2Engine: gpu or remove gpus"
// +kubebuilder:validation:XValidation:rule="has(self.update) || self.sectors.all(s, !has(s.commR))",fieldPath=".sectors",message="spec.sectors[].commR: only an update (spec.update) checks a sector key's commR; remove commR (a sealed sector's commR is in status.sectors[].commR)"
// +kubebuilder:validation:XValidation:rule="!has(self.update) || !has(self.update.sectorKeys.hostPath) || (has(self.placement) && has(self.placement.nodeName))",fieldPath=".placement",message="spec.placement.nodeName: a hostPath spec.update.sectorKeys lives on one node; pin the update to the node holding the sealed sectors"
// +kubebuilder:validation:XValidation:rule="!has(self.update) || !has(self.pc2Engine) || self.pc2Engine == 'cpu'",fieldPath=".pc2Engine",message="spec.pc2Engine: an update (spec.update) encodes and builds tree-r-last on the CPU; remove pc2Engine or set it to cpu"
// +kubebuilder:validation:XValidation:rule="!has(self.update) || !has(self.output) || !has(self.output.layout) || self.output.layout == 'Sealfleet'",fieldPath=".output.layout",message="spec.output.layout: an update writes the Sealfleet layout (<sector>/sealed, <sector>/cache); lotus' update/ and update-cache/ layout is not written yet: remove layout or set Sealfleet"
// +kubebuilder:validation:XValidation:rule="self.commit1 != 'FromSlot' || (self.proofType in ['V1', 'V1_1'] && !has(self.update))",fieldPath=".commit1",message="spec.commit1 FromSlot is for interactive proofs (proofType V1 or V1_1) that seal: SyntheticPoRep and NI-PoRep batches write their proofs right after PC2, and an update has no C1; remove commit1"
// +kubebuilder:validation:XValidation:rule="!has(self.seeds) || self.commit1 == 'FromSlot' || (has(self.proofType) && self.proofType == 'V1_1_Feat_SyntheticPoRep' && !has(self.update))",fieldPath=".seeds",message="spec.seeds are read only with spec.commit1 FromSlot or proofType V1_1_Feat_SyntheticPoRep (the operator runs C1); with LayerFiles your lotus or Curio runs C1 and takes the seed itself"
// +kubebuilder:validation:XValidation:rule="!has(self.seedTimeout) || self.commit1 == 'FromSlot'",fieldPath=".seedTimeout",message="spec.seedTimeout is only used with spec.commit1 FromSlot"
// +kubebuilder:validation:XValidation:rule="!has(self.seeds) || self.seeds.all(x, self.sectors.exists(s, s.number == x.number))",fieldPath=".seeds",message="spec.seeds: every seed must be for a sector of the batch (spec.sectors[].number)"
// +kubebuilder:validation:XValidation:rule="!has(self.abandonedSectors) || self.commit1 == 'FromSlot'",fieldPath=".abandonedSectors",message="spec.abandonedSectors is only read with spec.commit1 FromSlot (a batch waiting for its sectors' seeds); remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.abandonedSectors) || self.abandonedSectors.all(x, self.sectors.exists(s, s.number == x))",fieldPath=".abandonedSectors",message="spec.abandonedSectors: every entry must be a sector of the batch (spec.sectors[].number)"
// +kubebuilder:validation:XValidation:rule="!has(self.update) || !has(self.residentLayerPercent) || self.residentLayerPercent == 0",fieldPath=".residentLayerPercent",message="spec.residentLayerPercent: an update labels no layers; remove it"
// +kubebuilder:validation:XValidation:rule="!has(self.releaseTTL) || self.releasePolicy == 'AfterTTL'",message="spec.releaseTTL is only used with spec.releasePolicy AfterTTL: remove releaseTTL or set releasePolicy: AfterTTL"
// +kubebuilder:validation:XValidation:rule="self.releasePolicy != 'AfterTTL' || has(self.releaseTTL)",message="spec.releasePolicy AfterTTL needs spec.releaseTTL (e.g. releaseTTL: 24h)"
// +kubebuilder:validation:XValidation:rule="self.sectors.all(s, self.sectors.exists_one(t, t.number == s.number))",message="spec.sectors: sector numbers must be unique within a batch; remove or renumber the duplicated sector"
// +kubebuilder:validation:XValidation:rule="size(self.sectors) in [1, 2, 4, 8, 16, 32, 64, 128]",message="spec.sectors: the sealer supports batches of 1, 2, 4, 8, 16, 32, 64 or 128 sectors; add or remove sectors to reach one of these sizes"
// +kubebuilder:validation:XValidation:rule="!has(self.handoff) || (self.commit1 == 'FromSlot' && self.proofType == 'V1_1')",fieldPath=".handoff",message="spec.handoff: lotus asks for C1 with the seed after it precommits the sector, so the batch keeps its layers for it: set commit1: FromSlot and proofType V1_1 (what lotus-miner seals)"
// +kubebuilder:validation:XValidation:rule="!has(self.handoff) || self.sectors.all(s, !has(s.data) && has(s.ticketEpoch))",fieldPath=".sectors",message="spec.sectors: a batch handed to lotus (spec.handoff) seals CC sectors, each with ticketEpoch (the epoch its ticket was drawn at: lotus checks the ticket against its chain); data sectors are not handed over (lotus precommits them with their deals)"
// +kubebuilder:validation:XValidation:rule="!has(self.handoff) || (has(self.output) && has(self.output.hostPath) && self.output.layout == 'Lotus')",fieldPath=".output",message="spec.output: a batch handed to lotus writes a hostPath output with layout Lotus (the node agents serve its files to lotus from there)"
type SealBatchSpec struct {
	// sectorSize is the size of every sector in the batch: 2KiB, 8MiB or 512MiB (test
	// networks and tests) or 32GiB / 64GiB (mainnet). Immutable once the batch is placed.
	// +required
	SectorSize SectorSize `json:"sectorSize"`

	// proofType is the seal proof version and features; with sectorSize it names the
	// RegisteredSealProof StackedDrg<sectorSize><proofType> (e.g. StackedDrg32GiBV1_1).
	// V1_1 is what storage providers seal today; V1_1_Feat_SyntheticPoRep and
	// V1_2_Feat_NonInteractivePoRep select those proofs. Immutable once placed.
	// +kubebuilder:default=V1_1
	// +optional
	ProofType ProofType `json:"proofType,omitempty"`

	// minerID is the storage provider's actor address (f0… on mainnet, t0… on test networks);
	// its actor id is the prover id of every sector in the batch.
	// +kubebuilder:validation:Pattern=`^[ft]0(0|[1-9][0-9]{0,18})$`
	// +kubebuilder:validation:MaxLength=21
	// +required
	MinerID string `json:"minerID"`

	// sectors lists the sectors sealed together; the batch size (1, 2, 4, …, 128) is their
	// count. Immutable once placed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	// +required
	Sectors []SectorSpec `json:"sectors"`

	// placement narrows the nodes the batch may run on.
	// +optional
	Placement *Placement `json:"placement,omitempty"`

	// pc2Engine runs PC2 (column hashes, tree-c, tree-r-last) on the CPU, or on a GPU through
	// OpenCL (the batch then needs a node with a free nvidia.com/gpu and a sealer image built
	// with the gpu engine). The GPU kernels are tested in CI on a CPU OpenCL device (pocl).
	// +kubebuilder:validation:Enum=cpu;gpu
	// +kubebuilder:default=cpu
	// +optional
	PC2Engine PC2Engine `json:"pc2Engine,omitempty"`

	// gpus is how many GPUs the batch's PC2 uses with pc2Engine gpu: a count from 1 to 16
	// (default 1), or All: every GPU of the node it is placed on (the largest power of two of
	// its allocatable nvidia.com/gpu, at most 16; it waits until they are all free). Its pod asks
	// for that many nvidia.com/gpu, placement books them (status.gpus), and the sealer splits
	// each range's rows among them (a power of two of them share a range: with 3, two work and
	// one idles).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? self == 'All' : (self >= 1 && self <= 16)",message="spec.gpus: a count from 1 to 16, or All (every GPU of the node)"
	// +optional
	GPUs *intstr.IntOrString `json:"gpus,omitempty"`

	// dataSource is the volume the data sectors' staged files are read from, mounted
	// read-only in the sealer pod; needed when a sector has data.
	// +optional
	DataSource *DataSource `json:"dataSource,omitempty"`

	// residentLayerPercent is the share of the previous layer (all sectors) the sealer keeps in
	// memory while it labels the next one, on 1 GiB hugepages the batch books on top of its
	// buffers: expander parents are uniform over the previous layer, so each percent held
	// removes that share of PC1's random parent reads from storage (the part is read once,
	// sequentially, at each layer's start). 0 (the default): parents come from storage. Where
	// two whole layers fit the sealer's node cache (test sizes) the previous layer is in
	// memory anyway.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ResidentLayerPercent int32 `json:"residentLayerPercent,omitempty"`

	// commit1 says who runs C1 of an interactive (V1, V1_1) batch. LayerFiles (the default):
	// PC2 copies every layer into each sector's cache directory (layers × sector size per
	// sector) and the provider's lotus or Curio runs C1 from there. FromSlot: no layer copies;
	// after PC2 the batch keeps its slot (phase WaitingForSeeds) and, as each sector's seed
	// arrives in spec.seeds, runs C1 for it on the node from the labels in the slot (phase C1
	// while a C1 pod runs; seeds that arrive together share one pod) and writes its
	// commit-phase1-output into its cache directory. Once every sector has its output, was
	// abandoned, or seedTimeout passed, the batch completes and the release policy applies.
	// +kubebuilder:validation:Enum=LayerFiles;FromSlot
	// +kubebuilder:default=LayerFiles
	// +optional
	Commit1 Commit1Mode `json:"commit1,omitempty"`

	// seeds are the sectors' interactive PoRep seeds, written once each sector's precommit has
	// landed and its seed epoch has passed (commit1 FromSlot). A SyntheticPoRep batch takes them
	// too, at any time: once it is Completed, the operator runs C1 from each seeded sector's
	// stored synthetic proofs on its node (no slot held) and the sector's state becomes
	// C1Written (or C1Failed, with the reason in the C1Complete condition). A seed once given
	// cannot change.
	// +kubebuilder:validation:MaxItems=128
	// +listType=map
	// +listMapKey=number
	// +optional
	Seeds []SectorSeed `json:"seeds,omitempty"`

	// seedTimeout is how long after PC2 a FromSlot batch waits for all its seeds (default
	// 24h, at most 720h). Sectors with no seed by then lose their layers with the slot
	// (condition SeedsMissing names them) and must be sealed again.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('720h')",message="spec.seedTimeout must be between 0s and 720h"
	// +optional
	SeedTimeout *metav1.Duration `json:"seedTimeout,omitempty"`

	// abandonedSectors are sectors of a commit1 FromSlot batch whose owner gave up on them (a
	// lotus-miner's unsuccessful done notice, a partner's cleanup before its commit1): the batch
	// stops waiting for their seeds, runs no C1 for them (state Abandoned) and gives its slot
	// back once every other sector has its C1 output or timed out. A sector once abandoned
	// stays abandoned.
	// +kubebuilder:validation:MaxItems=128
	// +listType=set
	// +optional
	AbandonedSectors []int64 `json:"abandonedSectors,omitempty"`

	// update makes the batch a SnapDeals update instead of a seal: each sector's data
	// (sectors[].data) is encoded into that sector's sealed CC replica, read from
	// update.sectorKeys (filecoin-proofs encode_into), giving the updated replica, its
	// tree-d and tree-r-last, and comm_r_new. An update labels no layers: it holds no NVMe
	// slot or hugepages, only CPUs and output space, and needs no parent cache.
	// +optional
	Update *SnapUpdate `json:"update,omitempty"`

	// output is where the sealed replicas and cache directories are written.
	// +kubebuilder:default={hostPath: {path: "/var/lib/sealfleet/output"}}
	// +optional
	Output *OutputSpec `json:"output,omitempty"`

	// releasePolicy says when the batch's NVMe slot and scratch are given back:
	// OnCompletion (as soon as PC2 outputs are written), OnOutputsTaken (when
	// spec.outputsTaken is set to true, e.g. after C1 or a transfer), or AfterTTL
	// (releaseTTL after completion). A failed batch holds its slot until it is deleted
	// unless retries are exhausted and the policy is OnCompletion.
	// +kubebuilder:validation:Enum=OnCompletion;OnOutputsTaken;AfterTTL
	// +kubebuilder:default=OnCompletion
	// +optional
	ReleasePolicy ReleasePolicy `json:"releasePolicy,omitempty"`

	// releaseTTL is how long after completion the slot is kept with releasePolicy AfterTTL
	// (at most 720h).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('720h')",message="spec.releaseTTL must be between 0s and 720h"
	// +optional
	ReleaseTTL *metav1.Duration `json:"releaseTTL,omitempty"`

	// outputsTaken marks the outputs as taken (copied off, or C1 done), which releases the
	// slot under releasePolicy OnOutputsTaken.
	// +optional
	OutputsTaken bool `json:"outputsTaken,omitempty"`

	// handoff hands every sealed sector to the storage provider's lotus-miner: once the
	// batch's CommRs are known the operator calls the miner's SectorReceive (state
	// PreCommitting, with the ticket, CommD and CommR, and URLs on the node for the replica,
	// the cache and the unsealed file); lotus fetches them, precommits, and later asks the
	// operator for C1 with the seed (C1 runs from the slot), then says when the sector left its
	// pipeline, after which the sector's outputs are deleted. Needs the operator's remote-seal
	// provider (chart remoteSeal.enabled, remoteSeal.publicURL) and the batch in its namespace.
	// +optional
	Handoff *Handoff `json:"handoff,omitempty"`

	// maxRetries is how often a failed sealer pod is restarted on the same node and slot; the
	// sealer resumes from its last complete layer, so a retry costs little. 0 means a failure
	// is final. A failure that would repeat (bad input, a CPU without SHA-NI) is never retried.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=3
	// +optional
	MaxRetries *int32 `json:"maxRetries,omitempty"`

	// priority orders pending batches: higher first, then oldest first.
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=0
	// +optional
	Priority int32 `json:"priority,omitempty"`
}

// SectorSpec is one sector of the batch: committed capacity (CC), or holding deal data.
//
// A commD is taken only with the sector's data: a replica sealed under a commD whose data the
// sealer never saw is a CC replica no proof can back, and precommitting it costs the provider
// the deposit.
// +kubebuilder:validation:XValidation:rule="!has(self.commD) || has(self.data)",fieldPath=".commD",message="commD needs the sector's data: a sector sealed under a commD without its data can never be proven. Give the sector's data (its staged file and pieces), or omit commD to seal a committed-capacity (CC) sector"
type SectorSpec struct {
	// number is the sector number the miner allocated (0 … 2^63-1).
	// +kubebuilder:validation:Minimum=0
	// +required
	Number int64 `json:"number"`

	// ticket is the 32-byte sealing randomness, as 64 hex characters or 44 characters of
	// standard base64. Required to seal; absent in an update (spec.update).
	// +kubebuilder:validation:MaxLength=66
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9a-fA-F]{64}|[A-Za-z0-9+/]{43}=)$')",message="ticket must be 32 bytes: 64 hex characters or 44 characters of base64 ending in '='"
	// +optional
	Ticket string `json:"ticket,omitempty"`

	// ticketEpoch is the chain epoch the ticket was drawn at. Needed by a batch handed to
	// lotus (spec.handoff): lotus checks the ticket against its chain at that epoch and
	// refuses a sector whose ticket is too old to precommit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TicketEpoch *int64 `json:"ticketEpoch,omitempty"`

	// commD is the unsealed data commitment: 64 hex characters or a baga6ea4seaq… piece CID.
	// Only with data, and optional there: the sealer computes it from the pieces and
	// refuses a given one that differs. Absent for CC sectors (the zero-data commitment).
	// +kubebuilder:validation:MaxLength=66
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9a-fA-F]{64}|baga6ea4seaq[a-z2-7]{52})$')",message="commD must be 64 hex characters or a piece CID starting with baga6ea4seaq (64 characters); omit it for CC sectors"
	// +optional
	CommD string `json:"commD,omitempty"`

	// commR is, in an update (spec.update), the sealed CC sector's commR as the chain
	// records it: 64 hex characters or a bagboea4b5abc… sealed CID. The sealer refuses a
	// sector key whose p_aux gives another commR (the sector is left out, the others
	// updated), so a misplaced or overwritten sector key is never updated. Optional, and
	// only in an update.
	// +kubebuilder:validation:MaxLength=66
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9a-fA-F]{64}|bagboea4b5abc[a-z2-7]{52})$')",message="commR must be 64 hex characters or a sealed CID starting with bagboea4b5abc (65 characters)"
	// +optional
	CommR string `json:"commR,omitempty"`

	// data makes this a data sector: its staged file on spec.dataSource and the pieces the
	// file holds. The sealer checks the file against the pieces before it labels anything.
	// +optional
	Data *SectorData `json:"data,omitempty"`
}

// SectorData is a data sector's staged unsealed file and its deal pieces.
type SectorData struct {
	// file is the staged sector file, relative to spec.dataSource: fr32-padded as
	// filecoin-proofs' add_piece writes it (lotus' and Curio's unsealed sector file, or the
	// output of `sealer stage`), at most one sector long (zero beyond its end).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="file must be a path relative to spec.dataSource, without '..'"
	// +required
	File string `json:"file"`

	// pieces are the deals in the order they sit in the file, as lotus and Curio record
	// them; alignment padding between pieces and zero filler after the last are implied.
	// At most 64 per sector, so that a batch of 128 data sectors fits one API object.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +required
	Pieces []Piece `json:"pieces"`
}

// Piece is one deal piece: its CID and padded size.
type Piece struct {
	// cid is the piece CID (baga6ea4seaq…), or its commitment as 64 hex characters.
	// +kubebuilder:validation:MaxLength=66
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9a-fA-F]{64}|baga6ea4seaq[a-z2-7]{52})$')",message="cid must be a piece CID starting with baga6ea4seaq (64 characters) or 64 hex characters"
	// +required
	CID string `json:"cid"`

	// size is the padded piece size in bytes: a power of two from 128 bytes to 64 GiB.
	// +kubebuilder:validation:XValidation:rule="self in [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576, 2097152, 4194304, 8388608, 16777216, 33554432, 67108864, 134217728, 268435456, 536870912, 1073741824, 2147483648, 4294967296, 8589934592, 17179869184, 34359738368, 68719476736]",message="size must be the padded piece size: a power of two from 128 to 68719476736 bytes (lotus' PaddedPieceSize)"
	// +required
	Size int64 `json:"size"`
}

// DataSource is the volume holding data sectors' staged files; exactly one source.
// +kubebuilder:validation:XValidation:rule="has(self.hostPath) != has(self.persistentVolumeClaim)",message="spec.dataSource: set exactly one of hostPath or persistentVolumeClaim"
type DataSource struct {
	// hostPath reads the files from a directory on the sealing node.
	// +optional
	HostPath *HostPathData `json:"hostPath,omitempty"`

	// persistentVolumeClaim reads them from a claim in the batch's namespace.
	// +optional
	PersistentVolumeClaim *PVCOutput `json:"persistentVolumeClaim,omitempty"`
}

// Handoff names the miner a batch's sealed sectors are handed to.
type Handoff struct {
	// lotusMiner names a lotus-miner connection: a Secret an admin created in the operator's
	// remote-seal partner namespace, labelled sealfleet.io/lotus-miner, with keys apiURL (the
	// miner's JSON-RPC endpoint, e.g. http://miner:2345/rpc/v0), token (an admin API token)
	// and minerID (the batch's spec.minerID must be it).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	LotusMiner string `json:"lotusMiner"`
}

// Commit1Mode says who runs C1 of an interactive batch.
type Commit1Mode string

// C1 modes.
const (
	Commit1LayerFiles Commit1Mode = "LayerFiles"
	Commit1FromSlot   Commit1Mode = "FromSlot"
)

// SectorSeed is one sector's interactive PoRep seed: the chain randomness drawn at its seed
// epoch (lotus' and Curio's seed value and height).
type SectorSeed struct {
	// number is the sector (one of spec.sectors).
	// +kubebuilder:validation:Minimum=0
	// +required
	Number int64 `json:"number"`

	// randomness is the 32-byte seed, as 64 hex characters or 44 characters of base64.
	// +kubebuilder:validation:MaxLength=66
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9a-fA-F]{64}|[A-Za-z0-9+/]{43}=)$')",message="randomness must be 32 bytes: 64 hex characters or 44 characters of base64 ending in '='"
	// +required
	Randomness string `json:"randomness"`

	// epoch is the chain epoch the seed was drawn at.
	// +kubebuilder:validation:Minimum=0
	// +required
	Epoch int64 `json:"epoch"`
}

// ResidentLayerBytes is the memory spec.residentLayerPercent asks for: that share of one layer
// of every sector.
func (s *SealBatchSpec) ResidentLayerBytes() int64 {
	return int64(s.ResidentLayerPercent) * int64(s.SectorSize.Bytes()) * int64(len(s.Sectors)) / 100
}

// FromSlot reports whether the operator runs the batch's C1 from its slot.
func (s *SealBatchSpec) FromSlot() bool { return s.Commit1 == Commit1FromSlot }

// SeedWait is spec.seedTimeout with its default (24h).
func (s *SealBatchSpec) SeedWait() time.Duration {
	if s.SeedTimeout == nil {
		return DefaultSeedTimeout
	}
	return s.SeedTimeout.Duration
}

// DefaultSeedTimeout is how long a FromSlot batch waits for its seeds by default.
const DefaultSeedTimeout = 24 * time.Hour

// SnapUpdate is a SnapDeals update: where the sealed CC sectors it updates are.
type SnapUpdate struct {
	// sectorKeys is the volume holding the sealed CC sectors (their replicas and cache
	// directories with p_aux and t_aux), mounted read-only; typically an earlier batch's
	// output directory.
	// +required
	SectorKeys SectorKeySource `json:"sectorKeys"`
}

// SectorKeySource is where sealed sectors are read from, and how they are laid out there.
// +kubebuilder:validation:XValidation:rule="has(self.hostPath) != has(self.persistentVolumeClaim)",message="spec.update.sectorKeys: set exactly one of hostPath or persistentVolumeClaim"
type SectorKeySource struct {
	// hostPath reads them from a directory on the node (pin the update with
	// spec.placement.nodeName), e.g. /var/lib/sealfleet/output/<namespace>/<batch>.
	// +optional
	HostPath *HostPathData `json:"hostPath,omitempty"`

	// persistentVolumeClaim reads them from a claim in the batch's namespace.
	// +optional
	PersistentVolumeClaim *PVCOutput `json:"persistentVolumeClaim,omitempty"`

	// layout is how the sectors are laid out there: Sealfleet (<sector>/sealed and
	// <sector>/cache/) or Lotus (sealed/s-t0<miner>-<sector> and cache/s-t0<miner>-<sector>/),
	// as spec.output.layout wrote them.
	// +kubebuilder:default=Sealfleet
	// +optional
	Layout OutputLayout `json:"layout,omitempty"`
}

// IsUpdate reports whether the batch is a SnapDeals update (no PC1, no slot).
func (s *SealBatchSpec) IsUpdate() bool { return s.Update != nil }

// ProofTypeOrDefault is spec.proofType, V1_1 when unset.
func (s *SealBatchSpec) ProofTypeOrDefault() ProofType {
	if s.ProofType == "" {
		return ProofTypeV1_1
	}
	return s.ProofType
}

// GPUsAll is spec.gpus' word for every GPU of the node.
const GPUsAll = "All"

// GPURequest is what the batch asks of GPUs: a count (spec.gpus, default 1, with pc2Engine
// gpu; else 0), or all of the node's (all true, count 0).
func (s *SealBatchSpec) GPURequest() (count int32, all bool) {
	switch {
	case s.PC2Engine != PC2EngineGPU:
		return 0, false
	case s.GPUs == nil:
		return 1, false
	case s.GPUs.Type == intstr.String:
		return 0, s.GPUs.StrVal == GPUsAll
	}
	return s.GPUs.IntVal, false
}

// UsesGPUs reports whether the batch's PC2 runs on GPUs.
func (s *SealBatchSpec) UsesGPUs() bool { return s.PC2Engine == PC2EngineGPU }

// GPUsHeld is how many GPUs the placed batch holds: status.gpus, fixed at placement; for a
// batch placed before that field existed, its spec's count.
func (b *SealBatch) GPUsHeld() int32 {
	if !b.Spec.UsesGPUs() {
		return 0
	}
	if b.Status.GPUs > 0 {
		return b.Status.GPUs
	}
	n, _ := b.Spec.GPURequest()
	return n
}

// PC2EngineOrDefault is spec.pc2Engine, cpu when unset.
func (s *SealBatchSpec) PC2EngineOrDefault() PC2Engine {
	if s.PC2Engine == "" {
		return PC2EngineCPU
	}
	return s.PC2Engine
}

// OutputHostPath is the host directory the batch's outputs go to on its node (spec.output's
// hostPath, or the default), or "" for a PersistentVolumeClaim output.
func (s *SealBatchSpec) OutputHostPath() string {
	switch {
	case s.Output != nil && s.Output.PersistentVolumeClaim != nil:
		return ""
	case s.Output != nil && s.Output.HostPath != nil:
		return path.Clean(s.Output.HostPath.Path)
	}
	return DefaultOutputHostPath
}

// DefaultOutputHostPath is where a batch without spec.output writes, on its node.
const DefaultOutputHostPath = "/var/lib/sealfleet/output"

// Retries is spec.maxRetries with its default (3) when unset.
func (s *SealBatchSpec) Retries() int32 {
	if s.MaxRetries == nil {
		return DefaultMaxRetries
	}
	return *s.MaxRetries
}

// DefaultMaxRetries is the API default of spec.maxRetries.
const DefaultMaxRetries = 3

// Placement narrows where a batch may run.
// +kubebuilder:validation:XValidation:rule="!(has(self.nodeName) && has(self.nodeSelector))",message="spec.placement: set either nodeName (pin to one node) or nodeSelector, not both"
type Placement struct {
	// nodeName pins the batch to one node.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// nodeSelector restricts the batch to nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the batch run on nodes with matching taints.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// minRatePercent is the least share of its hashers' bound a node must be able to feed
	// PC1 at, by the random reads its layer devices measured (status.qualification of the
	// SealerNode): a node predicted below it is not a candidate. Default 25; 0 takes any
	// node. Nodes not qualified yet are predicted at the hashing bound.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	MinRatePercent *int32 `json:"minRatePercent,omitempty"`
}

// DefaultMinRatePercent is spec.placement.minRatePercent when unset.
const DefaultMinRatePercent = 25

// MinRate is spec.placement.minRatePercent or its default.
func (p *Placement) MinRate() int32 {
	if p == nil || p.MinRatePercent == nil {
		return DefaultMinRatePercent
	}
	return *p.MinRatePercent
}

// PC2Engine is where PC2 runs.
type PC2Engine string

// PC2 engines.
const (
	PC2EngineCPU PC2Engine = "cpu"
	PC2EngineGPU PC2Engine = "gpu"
)

// GPUResource is the extended resource a pc2Engine gpu sealer pod asks for: NVIDIA's device
// plugin advertises it (the local cluster's OpenCL stand-in too), and placement books it.
const (
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
)

// ReleasePolicy says when a batch gives its slot back.
type ReleasePolicy string

// Release policies.
const (
	ReleaseOnCompletion   ReleasePolicy = "OnCompletion"
	ReleaseOnOutputsTaken ReleasePolicy = "OnOutputsTaken"
	ReleaseAfterTTL       ReleasePolicy = "AfterTTL"
)

// OutputSpec is where PC2 outputs go; exactly one source.
// +kubebuilder:validation:XValidation:rule="has(self.hostPath) != has(self.persistentVolumeClaim)",message="spec.output: set exactly one of hostPath or persistentVolumeClaim"
type OutputSpec struct {
	// hostPath writes outputs to a directory on the sealing node.
	// +optional
	HostPath *HostPathOutput `json:"hostPath,omitempty"`

	// persistentVolumeClaim writes outputs to a claim in the batch's namespace.
	// +optional
	PersistentVolumeClaim *PVCOutput `json:"persistentVolumeClaim,omitempty"`

	// layout is how the batch's output directory is organised. Sealfleet (the default): one
	// directory per sector number with `sealed` and `cache/`. Lotus: a lotus/Curio storage
	// path (sectorstore.json, sealed/s-t0<miner>-<n>, cache/s-t0<miner>-<n>/) to attach to
	// lotus-miner or Curio as it is.
	// +kubebuilder:default=Sealfleet
	// +optional
	Layout OutputLayout `json:"layout,omitempty"`
}

// OutputLayout is how sealed sectors are laid out in the output directory.
// +kubebuilder:validation:Enum=Sealfleet;Lotus
type OutputLayout string

// Output layouts.
const (
	OutputLayoutSealfleet OutputLayout = "Sealfleet"
	OutputLayoutLotus     OutputLayout = "Lotus"
)

// HostPathData is a directory on the node that holds staged sector files.
// +kubebuilder:validation:XValidation:rule="!self.path.matches('/[.][.]?(/|$)') && !self.path.contains('//')",fieldPath=".path",message="path: an absolute directory without . or .. segments or //, under one of the node's SealerNode spec.hostPathRoots (default /var/lib/sealfleet)"
type HostPathData struct {
	// path is an absolute directory on the sealing node; sector files are relative to it.
	// +kubebuilder:validation:Pattern=`^/[^\x00]*$`
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Path string `json:"path"`
}

// HostPathOutput is a directory on the node.
// +kubebuilder:validation:XValidation:rule="!self.path.matches('/[.][.]?(/|$)') && !self.path.contains('//')",fieldPath=".path",message="path: an absolute directory without . or .. segments or //, one of the node's SealerNode spec.outputPaths"
type HostPathOutput struct {
	// path is an absolute directory; each batch writes under <path>/<namespace>/<name>/.
	// +kubebuilder:validation:Pattern=`^/[^\x00]*$`
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Path string `json:"path"`
}

// PVCOutput is a PersistentVolumeClaim.
type PVCOutput struct {
	// claimName is the claim's name in the batch's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClaimName string `json:"claimName"`
}

// SealBatchPhase is where a batch is in its life.
// +kubebuilder:validation:Enum=Pending;Placed;PC1;PC2;WaitingForSeeds;C1;Updating;Completed;Failed
type SealBatchPhase string

// Phases, in order.
const (
	PhasePending SealBatchPhase = "Pending"
	PhasePlaced  SealBatchPhase = "Placed"
	PhasePC1     SealBatchPhase = "PC1"
	PhasePC2     SealBatchPhase = "PC2"
	// PhaseWaitingForSeeds: PC2 is done and a commit1 FromSlot batch holds its slot until its
	// seeds are given (spec.seeds) or spec.seedTimeout passes.
	PhaseWaitingForSeeds SealBatchPhase = "WaitingForSeeds"
	// PhaseC1: the operator's C1 pod reads the labels from the slot.
	PhaseC1 SealBatchPhase = "C1"
	// PhaseUpdating: an update's sealer is encoding (spec.update; there is no PC1 or PC2).
	PhaseUpdating  SealBatchPhase = "Updating"
	PhaseCompleted SealBatchPhase = "Completed"
	PhaseFailed    SealBatchPhase = "Failed"
)

// SealBatchStatus is what the operator observed and decided.
type SealBatchStatus struct {
	// phase: Pending → Placed → PC1 → PC2 → Completed, or Failed; with commit1 FromSlot
	// PC2 → WaitingForSeeds → C1 → Completed; an update (spec.update) goes Pending → Placed →
	// Updating → Completed.
	// +optional
	Phase SealBatchPhase `json:"phase,omitempty"`

	// observedGeneration is the spec generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Placed, PC1Complete, PC2Complete, Released, Failed, DeletionIsBlocked.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// batchSize is the number of sectors (shown by kubectl get).
	// +optional
	BatchSize int32 `json:"batchSize,omitempty"`

	// registeredProof is the full RegisteredSealProof name.
	// +optional
	RegisteredProof string `json:"registeredProof,omitempty"`

	// node is the node the batch was placed on.
	// +optional
	Node string `json:"node,omitempty"`

	// slot is the index of the NVMe layer slot the batch holds on that node (none for an
	// update, which labels no layers).
	// +optional
	Slot *int32 `json:"slot,omitempty"`

	// slotRange is where the slot lies on each of the node's layer devices, fixed at placement
	// (a later change of the node's slot geometry does not move a held slot).
	// +optional
	SlotRange *SlotRange `json:"slotRange,omitempty"`

	// hugepages1Gi is the number of 1 GiB hugepages the sealer pod holds while it runs.
	// +optional
	Hugepages1Gi int32 `json:"hugepages1Gi,omitempty"`

	// gpus is the number of GPUs (nvidia.com/gpu) the sealer pod holds while it runs, fixed at
	// placement (spec.gpus, or the node's count for All).
	// +optional
	GPUs int32 `json:"gpus,omitempty"`

	// coreLayout summarises the CPUs the sealer was given.
	// +optional
	CoreLayout string `json:"coreLayout,omitempty"`

	// layout is the sealer's thread layout, decided once at placement; the sealer config,
	// every retry and the node agent's metrics all read it from here.
	// +optional
	Layout *CoreLayout `json:"layout,omitempty"`

	// cpus is the cpulist of the logical CPUs the batch holds on its node: every CPU of the
	// physical cores its layout occupies (what the pod's cpuset contains).
	// +optional
	CPUs string `json:"cpus,omitempty"`

	// outputBytes is the output space the batch booked at placement on its node's output
	// volume (0 for a PersistentVolumeClaim output, which has its own size).
	// +optional
	OutputBytes int64 `json:"outputBytes,omitempty"`

	// runningCPUs is where the sealer runs, as it reports: with the kubelet's CPU manager
	// policy static the kubelet picks the container's CPUs, and the sealer moves its layout
	// onto them (same cores and L3 groups shared). The node agent measures busy ratios here.
	// +optional
	RunningCPUs *RunningCPUs `json:"runningCPUs,omitempty"`

	// seedDeadline is when a WaitingForSeeds batch stops waiting (PC2's end + seedTimeout).
	// +optional
	SeedDeadline *metav1.Time `json:"seedDeadline,omitempty"`

	// c1Attempts counts C1 pods started for this batch (commit1 FromSlot).
	// +optional
	C1Attempts int32 `json:"c1Attempts,omitempty"`

	// podName is the sealer pod, in podNamespace: the operator's sealer namespace, or (when it
	// has none) the batch's own.
	// +optional
	PodName string `json:"podName,omitempty"`
	// +optional
	PodNamespace string `json:"podNamespace,omitempty"`

	// attempts counts sealer pods started for this batch.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// progress is the sealer's latest progress report.
	// +optional
	Progress *Progress `json:"progress,omitempty"`

	// sectors holds each sector's results once PC2 is done.
	// +listType=map
	// +listMapKey=number
	// +optional
	Sectors []SectorStatus `json:"sectors,omitempty"`

	// message is a human-readable summary of the latest transition or failure.
	// +optional
	Message string `json:"message,omitempty"`

	// placedTime, startTime and completionTime mark the lifecycle.
	// +optional
	PlacedTime *metav1.Time `json:"placedTime,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// prediction is how long placement expected the batch to take on its node, and, once the
	// sealer reported them, the measured times beside it.
	// +optional
	Prediction *Prediction `json:"prediction,omitempty"`
}

// Prediction is placement's estimate of a batch's run on one node (seconds as decimal
// strings, like progress.percent: exact in any client).
type Prediction struct {
	// pc1Seconds, pc2Seconds and proofsSeconds (SyntheticPoRep's synthetic vanilla proofs)
	// are the predicted phase times; finishTime is when the batch should be done.
	// +optional
	PC1Seconds string `json:"pc1Seconds,omitempty"`
	// +optional
	PC2Seconds string `json:"pc2Seconds,omitempty"`
	// +optional
	ProofsSeconds string `json:"proofsSeconds,omitempty"`
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`
	// labelsPerSecond is the predicted PC1 rate over all sectors; ratePercent its share of
	// the hashers' bound; bottleneck what limits it (hashers, or layer device reads).
	// +optional
	LabelsPerSecond int64 `json:"labelsPerSecond,omitempty"`
	// +optional
	RatePercent int32 `json:"ratePercent,omitempty"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Bottleneck string `json:"bottleneck,omitempty"`
	// pc2Bound is what bounds pc2Seconds: kernels (the hashing, on the CPUs or GPUs), copies
	// (layers to the GPUs and trees back), reads (the slot from the layer devices, at their
	// measured sequential bandwidth) or writes (the replica and trees).
	// +kubebuilder:validation:Enum=kernels;copies;reads;writes
	// +optional
	PC2Bound string `json:"pc2Bound,omitempty"`
	// basis says what the prediction rests on (the node's qualification, or the model's
	// defaults where the node was not qualified).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Basis string `json:"basis,omitempty"`
	// measuredPC1Seconds and measuredPC2Seconds are the sealer's own times of the run.
	// +optional
	MeasuredPC1Seconds string `json:"measuredPC1Seconds,omitempty"`
	// +optional
	MeasuredPC2Seconds string `json:"measuredPC2Seconds,omitempty"`
}

// RunningCPUs is the sealer's report of the CPUs it runs on.
type RunningCPUs struct {
	// granted is the cpulist the sealer container may run on.
	Granted string `json:"granted"`

	// l3Groups lists the CPUs the layout runs on, one cpulist per L3 group.
	// +optional
	L3Groups []string `json:"l3Groups,omitempty"`

	// moves maps each layout CPU that the grant did not contain to the granted CPU that
	// took its place; empty when the layout runs as placed.
	// +listType=atomic
	// +optional
	Moves []CPUMove `json:"moves,omitempty"`
}

// CPUMove is one layout CPU and the granted CPU that replaced it.
type CPUMove struct {
	// layout is the CPU the placement booked.
	Layout int32 `json:"layout"`
	// granted is the CPU the sealer runs that thread on.
	Granted int32 `json:"granted"`
}

// SlotRange is a held slot's byte range on each layer device.
type SlotRange struct {
	// offsetBytes is where the slot starts on every layer device (4 KiB aligned).
	OffsetBytes int64 `json:"offsetBytes"`
	// lengthBytes is the slot's share of every layer device.
	LengthBytes int64 `json:"lengthBytes"`
}

// CoreLayout assigns the sealer's threads to logical CPUs.
type CoreLayout struct {
	// coordinators are the coordinator threads, each with the hashers it feeds (one L3 group).
	// +listType=atomic
	Coordinators []LayoutCoordinator `json:"coordinators"`
	// roles are the batch-wide threads.
	Roles LayoutRoles `json:"roles"`
	// hashersPerCore is the hasher threads per physical core.
	// +optional
	HashersPerCore int32 `json:"hashersPerCore,omitempty"`
	// numaNodes are the NUMA nodes of the layout's CPUs.
	// +listType=atomic
	// +optional
	NUMANodes []int32 `json:"numaNodes,omitempty"`
	// shared marks a shared-core layout (SealerNode spec.sharedCores).
	// +optional
	Shared bool `json:"shared,omitempty"`
}

// LayoutCoordinator is one coordinator thread and its hashers.
type LayoutCoordinator struct {
	// cpu the coordinator is pinned to.
	CPU int32 `json:"cpu"`
	// hashers are its hasher threads.
	// +listType=atomic
	Hashers []LayoutHasher `json:"hashers"`
}

// LayoutHasher is one hasher thread.
type LayoutHasher struct {
	// cpu the hasher is pinned to.
	CPU int32 `json:"cpu"`
	// sectors it hashes.
	Sectors int32 `json:"sectors"`
}

// LayoutRoles are the logical CPUs of the batch-wide threads.
type LayoutRoles struct {
	Writer       int32 `json:"writer"`
	Reader       int32 `json:"reader"`
	Orchestrator int32 `json:"orchestrator"`
	PC2Reader    int32 `json:"pc2Reader"`
	PC2Hasher    int32 `json:"pc2Hasher"`
	PC2HasherCPU int32 `json:"pc2HasherCPU"`
	PC2Writer    int32 `json:"pc2Writer"`
	C1Reader     int32 `json:"c1Reader"`
}

// Progress is the sealer's progress within its current phase.
type Progress struct {
	// phase is the sealer's own phase (pc1, pc2, done).
	// +optional
	Phase string `json:"phase,omitempty"`
	// layer is the layer being labelled (1-based) during PC1.
	// +optional
	Layer int32 `json:"layer,omitempty"`
	// layers is the number of layers.
	// +optional
	Layers int32 `json:"layers,omitempty"`
	// percent of the whole batch done, 0-100, as a string to stay exact ("42.5").
	// +optional
	Percent string `json:"percent,omitempty"`
	// labelsPerSecond is the recent labelling rate over all sectors.
	// +optional
	LabelsPerSecond int64 `json:"labelsPerSecond,omitempty"`
	// etaSeconds is the estimated time left.
	// +optional
	ETASeconds int64 `json:"etaSeconds,omitempty"`
	// updateTime is when the operator read this report.
	// +optional
	UpdateTime *metav1.Time `json:"updateTime,omitempty"`
}

// SectorStatus holds one sector's results.
type SectorStatus struct {
	// number is the sector number.
	Number int64 `json:"number"`
	// replicaID, commD, commC, commRLast and commR are 32-byte values as hex, in the byte
	// order rust-fil-proofs uses.
	// +optional
	ReplicaID string `json:"replicaID,omitempty"`
	// +optional
	CommD string `json:"commD,omitempty"`
	// +optional
	CommC string `json:"commC,omitempty"`
	// +optional
	CommRLast string `json:"commRLast,omitempty"`
	// +optional
	CommR string `json:"commR,omitempty"`
	// commDCID is commD as a piece CID (baga6ea4seaq…), as lotus and Curio show it.
	// +optional
	CommDCID string `json:"commDCID,omitempty"`
	// commRCID is commR as a sealed CID (bagboea4b5abc…), as lotus and Curio show it.
	// +optional
	CommRCID string `json:"commRCID,omitempty"`
	// commROld is, for an update, the sealed CC sector's commR (the sector key's); commD
	// and commR are then the new data's commitment and the updated replica's comm_r_new.
	// +optional
	CommROld string `json:"commROld,omitempty"`
	// state is Sealed, Updated (an update), C1Written (commit1 FromSlot, or a SyntheticPoRep
	// sector's seed: commit-phase1-output is in the sector's cache directory), SeedMissing (no
	// seed before seedTimeout: the sector cannot be committed), C1Failed (its C1 could not be
	// written; reason says why) or Abandoned (its owner gave up on it: spec.abandonedSectors).
	// +optional
	State string `json:"state,omitempty"`
	// reason says why a sector is C1Failed or Abandoned.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// SealBatch is a batch of sectors sealed together by one sealer pod.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sb;sbatch,categories=sealfleet
// +kubebuilder:selectablefield:JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Sectors",type=integer,JSONPath=`.status.batchSize`,description="sectors in the batch"
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.sectorSize`
// +kubebuilder:printcolumn:name="Layer",type=string,JSONPath=`.status.progress.layer`,priority=1
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress.percent`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.node) || self.spec.sectors == oldSelf.spec.sectors",message="spec.sectors cannot change after the batch is placed (status.node is set): delete the batch and create a new one"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.node) || self.spec.sectorSize == oldSelf.spec.sectorSize",message="spec.sectorSize cannot change after the batch is placed: delete the batch and create a new one"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.node) || has(self.spec.handoff) == has(oldSelf.spec.handoff) && (!has(self.spec.handoff) || self.spec.handoff == oldSelf.spec.handoff)",message="spec.handoff cannot change after the batch is placed: delete the batch and create a new one"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.node) || self.spec.proofType == oldSelf.spec.proofType",message="spec.proofType cannot change after the batch is placed: delete the batch and create a new one"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.node) || self.spec.minerID == oldSelf.spec.minerID",message="spec.minerID cannot change after the batch is placed: delete the batch and create a new one"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.seeds) || oldSelf.spec.seeds.all(o, has(self.spec.seeds) && self.spec.seeds.exists(s, s == o))",message="spec.seeds: a seed once given cannot change or be removed"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.abandonedSectors) || oldSelf.spec.abandonedSectors.all(o, has(self.spec.abandonedSectors) && o in self.spec.abandonedSectors)",message="spec.abandonedSectors: a sector once abandoned cannot be taken back (its outputs are deleted); seal it again in a new batch"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.node) || self.spec.commit1 == oldSelf.spec.commit1",message="spec.commit1 cannot change after the batch is placed: delete the batch and create a new one"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.node) || has(self.spec.update) == has(oldSelf.spec.update) && (!has(self.spec.update) || self.spec.update == oldSelf.spec.update)",message="spec.update cannot change after the batch is placed: delete the batch and create a new one"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.node) || has(self.spec.dataSource) == has(oldSelf.spec.dataSource) && (!has(self.spec.dataSource) || self.spec.dataSource == oldSelf.spec.dataSource)",message="spec.dataSource cannot change after the batch is placed: delete the batch and create a new one"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name: at most 63 characters, because it is the sealfleet.io/batch label of the batch's pods (Kubernetes caps label values at 63) and starts every name derived from it (pods, ConfigMaps, disruption budget); choose a shorter name"
type SealBatch struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the batch the user asks for.
	// +required
	Spec SealBatchSpec `json:"spec"`
	// status is what the operator observed.
	// +optional
	Status SealBatchStatus `json:"status,omitempty"`
}

// SealBatchList is a list of SealBatches.
// +kubebuilder:object:root=true
type SealBatchList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SealBatch `json:"items"`
}
