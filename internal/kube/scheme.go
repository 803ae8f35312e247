// Package kube holds small Kubernetes helpers shared by the operator and the node agent.
package kube

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

// Scheme returns a scheme with the core Kubernetes types and the sealfleet API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := sealv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
