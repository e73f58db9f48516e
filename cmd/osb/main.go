// Command osb is the command-line client of OpenSandbox: it creates and
// manages sandboxes, runs commands in them, moves files in and out and
// opens interactive terminals. Everything lives in internal/osbcli.
package main

import (
	"os"

	"github.com/opensandbox-go/opensandbox/internal/osbcli"
)

func main() {
	os.Exit(osbcli.Run(os.Args[1:]))
}
