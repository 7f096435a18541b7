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
// CLAUDE_CONFIG_DIR points at an empty directory, so that no test (nor a
// child process it starts) reads the developer's ~/.claude.json, whatever
// HOME it leaves; tests of Claude Code's files set their own (set but
// empty: ~/.claude.json of their HOME).
func TestMain(m *testing.M) {
	rt.RunShimIfRequested()
	if len(os.Args) == 3 && os.Args[1] == demoServerCmd {
		if err := runDemoServer(context.Background(), os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if _, set := os.LookupEnv("CLAUDE_CONFIG_DIR"); !set {
		dir, err := os.MkdirTemp("", "mcpledger-test-claude-")
		if err != nil {
			panic(err)
		}
		os.Setenv("CLAUDE_CONFIG_DIR", dir)
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}
