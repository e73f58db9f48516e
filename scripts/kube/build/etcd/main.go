// Command etcd is the etcd server of the test cluster: the upstream server
// package's entry point, built from the Go module proxy at a pinned version.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
