// Package v1alpha1 holds the sealfleet.io/v1alpha1 API: SealBatch (a batch of sectors to seal)
// and SealerNode (one opted-in node's sealing inventory).
// +kubebuilder:object:generate=true
// +groupName=sealfleet.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "sealfleet.io", Version: "v1alpha1"}

	// SchemeBuilder registers the API's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
