package controllers

import (
	"strings"
	"testing"
)

// TestNodePodNamespacesMustBeServed: a builder or scrub namespace outside --watch-namespaces is
// refused at start-up with the flag and the fix; inside, or with every namespace served, or
// with node caches off, it is accepted.
func TestNodePodNamespacesMustBeServed(t *testing.T) {
	for flag, o := range map[string]Options{
		"--parent-cache-namespace": {WatchNamespaces: "a,b", ParentCacheNamespace: "c", ScrubNamespace: "a"},
		"--scrub-namespace":        {WatchNamespaces: "a,b", ParentCacheNamespace: "a", ScrubNamespace: "c"},
	} {
		err := o.checkNodePodNamespaces()
		if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "watchNamespaces") {
			t.Errorf("%s outside the served namespaces: %v", flag, err)
		}
	}
	for _, o := range []Options{{WatchNamespaces: "a,b", ParentCacheNamespace: "b", ScrubNamespace: "a"}, {ParentCacheNamespace: "c", ScrubNamespace: "d"}, {WatchNamespaces: "a", ScrubNamespace: "a"}} {
		if err := o.checkNodePodNamespaces(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
