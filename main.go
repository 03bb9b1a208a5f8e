// Command leasehold is a lock server that speaks RESP: take, check, extend
// and release leases with fencing tokens from redis-cli or any Redis client.
// The command line (serve and the client commands) is package command.
package main

import (
	"context"
	"os"

	"github.com/leasehold/leasehold/command"
)

// version is set at build time: -ldflags "-X main.version=...". Left
// empty, leasehold reports the module version or git revision that go build
// and go install embed.
var version = ""

func main() {
	// SIGINT and SIGTERM cancel ctx: serve shuts down, a client command
	// stops waiting, run passes them on to its command.
	ctx, stop := command.SignalContext(context.Background())
	code := command.Run(ctx, os.Args, version)
	stop()
	os.Exit(code)
}
