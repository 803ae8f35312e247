package controllers

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
)

func TestRefusalReason(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	cases := []struct {
		err  error
		want sealv1.Reason
		ok   bool
	}{
		{apierrors.NewForbidden(pods, "p", errors.New("exceeded quota: q, requested: pods=1, used: pods=0, limited: pods=0")), sealv1.ReasonQuotaExceeded, true},
		{apierrors.NewForbidden(pods, "p", errors.New("status unknown for quota: q, resources: pods")), sealv1.ReasonQuotaExceeded, true},
		{apierrors.NewForbidden(pods, "p", errors.New(`violates PodSecurity "baseline:latest": privileged`)), sealv1.ReasonPodSecurity, true},
		{apierrors.NewForbidden(pods, "p", errors.New(`admission webhook "deny.example.com" denied the request`)), sealv1.ReasonWebhookRefused, true},
		{apierrors.NewForbidden(pods, "p", errors.New(`User "system:serviceaccount:x:y" cannot create resource "pods"`)), sealv1.ReasonForbidden, true},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.TooLong(field.NewPath("metadata", "labels"), "x", 63)}), sealv1.ReasonObjectInvalid, true},
		{apierrors.NewServerTimeout(pods, "create", 1), "", false},
		{apierrors.NewConflict(pods, "p", errors.New("changed")), "", false},
		{errors.New("connection refused"), "", false},
	}
	for _, c := range cases {
		got, ok := refusalReason(c.err)
		if got != c.want || ok != c.ok {
			t.Errorf("%v: got %q %v, want %q %v", c.err, got, ok, c.want, c.ok)
		}
	}
}
