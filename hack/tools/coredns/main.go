// Command coredns is CoreDNS v1.15 with only the plugins the local cluster's
// Corefile uses (hack/cluster/dns/coredns.yaml), CoreDNS's own way to build
// a server with fewer plugins (dnsserver.SetDirectives): a first build
// compiles these few instead of every plugin and the cloud SDKs they pull in.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins, in the order CoreDNS chains them (its
// plugin.cfg).
var directives = []string{"ready", "health", "errors", "loadbalance", "cache", "kubernetes"}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		panic(err)
	}
	coremain.Run()
}
