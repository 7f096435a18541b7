// Command mcpledger runs the MCP servers an agent depends on and keeps a
// ledger of everything that happens to them. See `mcpledger help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	rt "github.com/mcpledger/mcpledger/runtime"
)

func main() {
	// Started by the runtime as its reaper? Then be one (never returns).
	rt.RunShimIfRequested()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		os.Exit(reportError(os.Stderr, err))
	}
}
