package runtime_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/store"
)

// TestServerTextNeverJournalsSecrets runs a stdio server that prints its
// own token on stderr and a password on stdout, then dies before the
// handshake, and checks that the journal file holds neither, while the
// stderr tail and the skipped stdout line are journaled (redacted).
func TestServerTextNeverJournalsSecrets(t *testing.T) {
	const (
		token    = "planted-T0ken-9f8e7d6c" // the server's own env value
		password = "hunterTwoStdoutWord"    // a "password: v" line on stdout (no digits: not a resolved secret)
	)
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The values come from the env: the script itself (args) is journaled
	// as written.
	script := `echo "starting with token $API_TOKEN" >&2; echo "password: $GREETING"; ` +
		`echo "GET /v1 Authorization: Bearer $API_TOKEN" >&2; sleep 0.2; exit 3`
	c, s := stdio("leaky", "sh", []string{"-c", script}, "API_TOKEN="+token, "GREETING="+password)
	opts := fastOpts(configOf(c, s))
	opts.Decider.MaxAttempts = 1
	m, _ := runtime.New(storeJournal{J: j}, opts)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	sid := m.Session()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, ok := m.Snapshot().Server("leaky"); ok && st.State == events.StateFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never ended failed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	var tail []string
	var skipped []string
	for _, e := range sessionEvents(t, j, sid) {
		switch p := e.Payload.(type) {
		case *events.ProcessExited:
			tail = append(tail, p.StderrTail...)
		case *events.OutputSkipped:
			skipped = append(skipped, p.Line)
		}
	}
	if !slices.ContainsFunc(tail, func(l string) bool { return strings.HasPrefix(l, "starting with token [REDACTED sha256:") }) {
		t.Errorf("stderr tail %q: the token line is missing or not redacted", tail)
	}
	if !slices.ContainsFunc(skipped, func(l string) bool { return strings.HasPrefix(l, "password: [REDACTED sha256:") }) {
		t.Errorf("skipped stdout lines %q: the password line is missing or not redacted", skipped)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{token, password} {
		if bytes.Contains(raw, []byte(sec)) {
			t.Errorf("the journal file holds %q", sec)
		}
	}
}
