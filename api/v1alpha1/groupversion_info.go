// Package v1alpha1 holds the sealfleet.io/v1alpha1 API: SealBatch (a batch of sectors to seal)
// and SealerNode (one opted-in node's sealing inventory).
// +kubebuilder:object:generate=true
// +groupName=sealfleet.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "sealfleet.io", Version: "v1alpha1"}

	// SchemeBuilder registers the API's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers every kind of the API and its list.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&SealBatch{}, &SealBatchList{},
		&SealOrder{}, &SealOrderList{},
		&SealerNode{}, &SealerNodeList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
