package controllers

// Finalizer guarantees that a deleted batch gives back its slot.
const Finalizer = "sealfleet.io/release"

// AnnotationForceRelease on a SealBatch gives its slot back without a scrub (no dirty-slot
// record): for an admin who knows the slot holds nothing worth discarding. It never frees a
// slot a sealer may still write: the pod must be gone, or its node gone or tainted
// out-of-service.
const AnnotationForceRelease = "sealfleet.io/force-release"
