// Command etcd is etcd's server built at the version k8s.io/kubernetes pins, so it shares
// the Kubernetes build's dependency graph instead of needing a module of its own.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
