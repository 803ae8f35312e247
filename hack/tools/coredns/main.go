// Command coredns is the local cluster's DNS (hack/cluster.sh): CoreDNS with only the plugins
// its Corefile uses (hack/coredns.yaml), so that the build pulls none of the cloud back ends.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The order a request passes the plugins in: CoreDNS's own order (its plugin.cfg), restricted
// to the ones compiled in above.
func init() {
	dnsserver.Directives = []string{
		"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes",
	}
}

func main() { coremain.Run() }
