package main

import (
	"context"
	"fmt"
	"os"
	"testing"

	rt "github.com/mcpledger/mcpledger/runtime"
)

// TestMain lets the test binary act as the runtime's reaper, as the real binary
// does: commands under test pass os.Executable() as Options.ShimPath. It is
// also the demo's servers, which demo runs as os.Executable() __demo-server KIND.
func TestMain(m *testing.M) {
	rt.RunShimIfRequested()
	if len(os.Args) == 3 && os.Args[1] == demoServerCmd {
		if err := runDemoServer(context.Background(), os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
