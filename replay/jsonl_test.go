package replay_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// An exported session reads back as the same events, one line each.
func TestJSONLRoundTrip(t *testing.T) {
	evs := golden(t, "approvals.jsonl")
	// A call result bigger than bufio.Scanner's default 64 KiB line.
	for i := range evs {
		if p, ok := evs[i].Payload.(*events.CallFinished); ok {
			big := *p
			big.Result.Text = `"` + strings.Repeat("x", 100<<10) + `"`
			evs[i].Payload = &big
		}
	}
	var buf bytes.Buffer
	if err := replay.WriteJSONL(&buf, evs); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Count(buf.String(), "\n"), len(evs); got != want {
		t.Errorf("%d lines for %d events", got, want)
	}
	got, err := replay.ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, evs) {
		t.Errorf("read back %d events that differ from the %d written", len(got), len(evs))
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestWriteJSONLReportsTheWriteError(t *testing.T) {
	full := errors.New("disk full")
	for _, n := range []int{1, 35} { // within bufio's buffer, and past it
		evs := golden(t, "approvals.jsonl")[:n]
		if err := replay.WriteJSONL(failingWriter{full}, evs); !errors.Is(err, full) {
			t.Errorf("WriteJSONL of %d events to a full disk = %v", n, err)
		}
	}
}

// Blank lines are skipped; a line that does not decode stops the read
// with its line number, after the events before it.
func TestReadJSONLReportsTheLineThatDoesNotDecode(t *testing.T) {
	var buf bytes.Buffer
	if err := replay.WriteJSONL(&buf, golden(t, "approvals.jsonl")[:2]); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(buf.String(), "\n")
	in := lines[0] + "\n" + lines[1] + `{"seq":3,"kind":"server.transitioned","payl` + "\n" + lines[0]
	got, err := replay.ReadJSONL(strings.NewReader(in))
	if err == nil || !strings.HasPrefix(err.Error(), "line 4: ") {
		t.Errorf("ReadJSONL = %v, want an error at line 4", err)
	}
	if len(got) != 2 || got[1].Seq != 2 {
		t.Errorf("ReadJSONL returned %d events before the bad line, want seqs 1 and 2", len(got))
	}
	if got, err := replay.ReadJSONL(strings.NewReader("\n\n")); err != nil || len(got) != 0 {
		t.Errorf("ReadJSONL of blank lines = %d events, %v", len(got), err)
	}
}
