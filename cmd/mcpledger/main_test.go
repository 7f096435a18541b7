package main

import (
	"os"
	"testing"

	rt "github.com/mcpledger/mcpledger/runtime"
)

// TestMain lets the test binary act as the runtime's reaper, as the real binary
// does: commands under test pass os.Executable() as Options.ShimPath.
func TestMain(m *testing.M) {
	rt.RunShimIfRequested()
	os.Exit(m.Run())
}
