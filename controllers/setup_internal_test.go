package controllers

import (
	"strings"
	"testing"
)

// TestParentCacheNamespaceMustBeServed: a builder namespace outside --watch-namespaces is
// refused at start-up with the flag and the fix; inside, or with every namespace served, or
// with node caches off, it is accepted.
func TestParentCacheNamespaceMustBeServed(t *testing.T) {
	err := (&Options{WatchNamespaces: "a,b", ParentCacheNamespace: "c"}).checkParentCacheNamespace()
	if err == nil || !strings.Contains(err.Error(), "--parent-cache-namespace") || !strings.Contains(err.Error(), "watchNamespaces") {
		t.Errorf("outside the served namespaces: %v", err)
	}
	for _, o := range []Options{{WatchNamespaces: "a,b", ParentCacheNamespace: "b"}, {ParentCacheNamespace: "c"}, {WatchNamespaces: "a"}} {
		if err := o.checkParentCacheNamespace(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
