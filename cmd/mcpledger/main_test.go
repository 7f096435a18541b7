package main

import (
	"os"
	"testing"

	rt "github.com/mcpledger/mcpledger/runtime"
)

// TestMain lets the test binary act as a server shim, as the real binary
// does: commands under test pass os.Executable() as the shim.
func TestMain(m *testing.M) {
	rt.RunShimIfRequested()
	os.Exit(m.Run())
}
