package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
)

// TestStatusTableAligned: every cell of the status table starts where its
// header does, however long a name, state or reason is (attempts_exhausted
// used to push the columns after it right), numbers are right-aligned, and
// no line ends in spaces.
func TestStatusTableAligned(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rows := []projections.ServerStatus{
		{Name: "a", State: events.StateReady, Transport: events.TransportStdio, Tools: 3, Attempt: 1, Since: now.Add(-5 * time.Second).UnixNano()},
		{Name: "a-server-with-a-name-longer-than-twenty", State: events.StateFailed, Reason: events.ReasonExhausted,
			Transport: events.TransportHTTP, Tools: 12345, Attempt: 5, Error: "exit: exit status 1"},
		{Name: "b", State: events.StateReconnecting, Reason: events.Reason("a_reason_longer_than_any_known_one"), Transport: events.TransportSSE, Attempt: 2},
	}
	var sb strings.Builder
	printStatus(&sb, style{}, rows, now, "AT THE END")
	lines := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 rows, got:\n%s", sb.String())
	}
	header := lines[0]
	cols := []string{"SERVER", "AT THE END", "REASON", "TRANSPORT", "ERROR"}
	cells := [][]string{
		{"a", "ready", "-", "stdio", ""},
		{rows[1].Name, "failed", "attempts_exhausted", "http", "exit: exit status 1"},
		{"b", "reconnecting", "a_reason_longer_than_any_known_one", "sse", ""},
	}
	for i, line := range lines[1:] {
		if strings.HasSuffix(line, " ") {
			t.Errorf("row %d ends in a space: %q", i, line)
		}
		for c, col := range cols {
			at := strings.Index(header, col)
			want := cells[i][c]
			if want == "" {
				continue
			}
			if at < 0 || len(line) < at+len(want) || line[at:at+len(want)] != want || at > 0 && line[at-1] != ' ' {
				t.Errorf("row %d: %s %q does not start under its header at %d:\n%s\n%s", i, col, want, at, header, line)
			}
		}
		// TOOLS, ATTEMPT and SINCE end where their headers end.
		for _, col := range []string{"TOOLS", "ATTEMPT", "SINCE"} {
			end := strings.Index(header, col) + len(col)
			if len(line) < end || len(line) > end && line[end] != ' ' || line[end-1] == ' ' {
				t.Errorf("row %d: %s is not right-aligned under its header:\n%s\n%s", i, col, header, line)
			}
		}
	}
	if !strings.Contains(lines[2], "12345") || !strings.Contains(lines[1], " 5s") {
		t.Errorf("tools or since missing:\n%s", sb.String())
	}
}
