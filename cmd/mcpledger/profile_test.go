package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeProfiles: MCPLEDGER_CPUPROFILE and MCPLEDGER_TRACE make serve
// write a CPU profile (with its allocations beside it) and an execution
// trace of the calls it served, complete once serve has returned; a file
// that cannot be created is refused with the variable's name, before
// anything is served.
func TestServeProfiles(t *testing.T) {
	if f := flag.Lookup("test.cpuprofile"); f != nil && f.Value.String() != "" {
		t.Skip("the test binary profiles itself (-cpuprofile): serve cannot start a second CPU profile")
	}
	f := newServeFixture(t)
	cpu, tr := filepath.Join(f.dir, "cpu.prof"), filepath.Join(f.dir, "serve.trace")
	t.Setenv("MCPLEDGER_CPUPROFILE", cpu)
	t.Setenv("MCPLEDGER_TRACE", tr)
	clientR, serveW := io.Pipe()
	serveR, clientW := io.Pipe()
	done, errb := runServeStdio(f.cfg, f.dir, serveR, serveW)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "profiled", Version: "1"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__good__echo", Arguments: map[string]any{"message": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	cs.Close()
	waitServeEnd(t, done, errb)

	for _, p := range []string{cpu, cpu + ".allocs"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// A profile is a gzipped protocol buffer.
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s is not a profile: %v", filepath.Base(p), err)
			continue
		}
		if pb, err := io.ReadAll(zr); err != nil || len(pb) == 0 {
			t.Errorf("%s: %d bytes of profile, %v", filepath.Base(p), len(pb), err)
		}
	}
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	// A trace begins with its header, and a stopped one is more than that.
	if !bytes.HasPrefix(b, []byte("go 1.")) || len(b) < 1024 {
		t.Errorf("serve.trace: %d bytes, beginning %q", len(b), b[:min(len(b), 16)])
	}

	for _, v := range []string{"MCPLEDGER_CPUPROFILE", "MCPLEDGER_TRACE"} {
		t.Run("unwritable "+v, func(t *testing.T) {
			t.Setenv("MCPLEDGER_CPUPROFILE", "")
			t.Setenv("MCPLEDGER_TRACE", "")
			t.Setenv(v, filepath.Join(f.dir, "missing", "file"))
			var out, errb bytes.Buffer
			err := run(t.Context(), []string{"serve", "--stdio", "--mcp-config", f.cfg, "--workspace", f.dir}, strings.NewReader(""), &out, &errb)
			if err == nil || !strings.Contains(err.Error(), v+": ") || !strings.Contains(err.Error(), "give a writable file, or unset it") {
				t.Errorf("serve with %s in a missing directory: %v", v, err)
			}
			if out.Len() > 0 {
				t.Errorf("served: %q", out.String())
			}
		})
	}
}
