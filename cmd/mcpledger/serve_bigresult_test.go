package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
)

// TestServeBigResult: a result over the 16 MiB message limit arrives
// through serve --stdio cut and marked with its whole size, instead of
// failing: 100 MB under the default bound (its first 50,000 characters),
// 20 MB under a server's "maxResultChars": 40 (40 characters) and under
// "maxResultChars": 0 (no bound of the guard's, but the cut in transit
// keeps 50,000 characters and says so); the session stays up, and each
// call.finished records the message's size (wire_bytes) and the whole
// rendering's.
func TestServeBigResult(t *testing.T) {
	if testing.Short() {
		t.Skip("140 MB through serve")
	}
	f := newGuardFixture(t)
	clientR, serveW := io.Pipe()
	serveR, clientW := io.Pipe()
	done, errb := runServeStdio(f.cfg, f.dir, serveR, serveW)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "big-client", Version: "1"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool  string
		bytes int
		kept  int
	}{
		{"mcp__good__big", 100_000_000, 50_000},
		{"mcp__tiny__big", 20_000_000, 40},
		{"mcp__whole__big", 20_000_000, 50_000},
	} {
		txt := blockTexts(t, guardCall(t, cs, tc.tool, map[string]any{"bytes": tc.bytes}))
		want := []string{strings.Repeat("x", tc.kept), fmt.Sprintf("[mcpledger: output truncated: %d of %d characters cut]", tc.bytes-tc.kept, tc.bytes)}
		if !slices.Equal(txt, want) {
			t.Errorf("%s of %d bytes: %d blocks, the first of %d characters, the last %.100q", tc.tool, tc.bytes, len(txt), len(txt[0]), txt[len(txt)-1])
		}
	}
	if txt := blockTexts(t, guardCall(t, cs, "mcp__good__echo", map[string]any{"message": "after"})); !slices.Equal(txt, []string{"after"}) {
		t.Errorf("after the big results: %q", txt)
	}
	cs.Close()
	waitServeEnd(t, done, errb)
	names := map[string]string{}
	got := map[string][3]int64{}
	for _, e := range readEvents(t, f.journal) {
		switch p := e.Payload.(type) {
		case *events.CallStarted:
			names[p.CallID] = p.Name
		case *events.CallFinished:
			if p.Outcome != events.OutcomeOK {
				t.Errorf("%s: %s %s", names[p.CallID], p.Outcome, p.Error)
			}
			// The envelope around the text: {"jsonrpc":"2.0","id":N,"result":{"content":[{"type":"text","text":"…"}]}}
			got[names[p.CallID]] = [3]int64{p.RenderedChars, p.CutChars, p.WireBytes / 1000}
		}
	}
	for n, want := range map[string][3]int64{
		"mcp__good__big":  {100_000_000, 99_950_000, 100_000},
		"mcp__tiny__big":  {20_000_000, 19_999_960, 20_000},
		"mcp__whole__big": {20_000_000, 19_950_000, 20_000},
		"mcp__good__echo": {5, 0, 0},
	} {
		if got[n] != want {
			t.Errorf("%s: call.finished rendered, cut, wire kB %v, want %v", n, got[n], want)
		}
	}
}
