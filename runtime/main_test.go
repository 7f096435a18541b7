package runtime_test

import (
	"os"
	"testing"

	"github.com/mcpledger/mcpledger/runtime"
)

// TestMain lets the test binary act as the reaper (tests that exercise
// it set Options.ShimPath to os.Args[0]).
func TestMain(m *testing.M) {
	runtime.RunShimIfRequested()
	os.Exit(m.Run())
}
