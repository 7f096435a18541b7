package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	runtimegc "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// callEvents returns the call-related events of session sid, as
// "kind:tool-or-outcome" strings in journal order.
func callEvents(t *testing.T, j *store.Journal, sid uuid.UUID) ([]string, []events.Event) {
	t.Helper()
	var out []string
	var evs []events.Event
	for _, e := range sessionEvents(t, j, sid) {
		switch p := e.Payload.(type) {
		case *events.CallDecided:
			out = append(out, "decided:"+p.Tool+":"+p.Decision+":"+p.By)
		case *events.CallStarted:
			s := "started:" + p.Tool
			if p.RetryOf != "" {
				s += ":retry"
			}
			out = append(out, s)
		case *events.CallFinished:
			out = append(out, "finished:"+p.Outcome)
		default:
			continue
		}
		evs = append(evs, e)
	}
	return out, evs
}

// TestCallSecretsNeverJournaled plants one secret in a server's env value,
// in a header and in call arguments (plus others under a secret-looking
// key and in a credential format), makes calls whose arguments, results
// and errors carry them, and checks that the journal file's bytes hold
// none of them.
func TestCallSecretsNeverJournaled(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	const (
		secret   = "planted-S3cret-7f3a9c21e5"     // env value, header value, argument
		password = "hunter2-correct-horse-battery" // under "password"
		ghToken  = "ghp_0123456789abcdefghijABCDEFGHIJ0123"
		apiKey   = "sk-proj-Zq8v2LmN4xR7tY1uW3eB5cD9" // on a line of its own
		nested   = "n3sted-Pw-0b7c"                   // under "password" in JSON in a string in the text
	)
	// Outside JSON: a .env line, a DSN, an INI line, a PEM body.
	plain := []string{"envPw-1a2b3c", "dsnPw-4d5e6f", "iniKey/7g8h9i", "pemBody0j1k2l3m"}
	files := "DB_PASSWORD=" + plain[0] + "\nDATABASE_URL=postgres://app:" + plain[1] + "@db:5432/app\n[default]\naws_secret_access_key = " +
		plain[2] + "\n-----BEGIN RSA PRIVATE KEY-----\n" + plain[3] + "\n-----END RSA PRIVATE KEY-----\n"
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, s := stdio("vault", bin, nil, "API_TOKEN="+secret, "MCPTEST_TOOL_COUNT=1")
	s.Headers = map[string]string{"Authorization": "Bearer " + secret}
	m, _ := runtime.New(storeJournal{J: j}, fastOpts(configOf(c, s)))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	r, err := m.CallTool(ctx, "mcp__vault__env", map[string]any{"name": "API_TOKEN"})
	if err != nil || textOf(t, r) != secret {
		t.Fatalf("env: %v %v", err, r)
	}
	if r, err := m.CallTool(ctx, "mcp__vault__echo", map[string]any{"message": "the key is " + secret + " and " + ghToken}); err != nil || !strings.Contains(textOf(t, r), secret) {
		t.Fatalf("echo: %v", err)
	}
	// A credential at the start of a line is `\n` + the key in JSON.
	if r, err := m.CallTool(ctx, "mcp__vault__echo", map[string]any{"message": "keys:\n" + apiKey + "\n\t" + ghToken}); err != nil || !strings.Contains(textOf(t, r), apiKey) {
		t.Fatalf("echo lines: %v", err)
	}
	// kubectl's last-applied-configuration: JSON in a string in JSON text,
	// two strings deep once the call is journaled as JSON.
	applied := `{"metadata":{"annotations":{"last-applied":"{\"data\":{\"password\":\"` + nested + `\"}}"}}}`
	if r, err := m.CallTool(ctx, "mcp__vault__echo", map[string]any{"message": applied}); err != nil || textOf(t, r) != applied {
		t.Fatalf("echo nested: %v", err)
	}
	if r, err := m.CallTool(ctx, "mcp__vault__echo", map[string]any{"message": files}); err != nil || textOf(t, r) != files {
		t.Fatalf("echo files: %v", err)
	}
	if _, err := m.CallTool(ctx, "mcp__vault__t0000", map[string]any{"password": password, "note": "Authorization: Bearer " + secret}); err != nil {
		t.Fatalf("t0000: %v", err)
	}
	// A validation error quoting the argument is journaled redacted too.
	if _, err := m.CallTool(ctx, "mcp__vault__add", map[string]any{"a": secret, "b": 1}); !errors.Is(err, runtime.ErrInvalidArguments) {
		t.Fatalf("add: %v", err)
	}
	sid := m.Session()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := callEvents(t, j, sid)
	want := []string{"started:env", "finished:ok", "started:echo", "finished:ok", "started:echo", "finished:ok", "started:echo", "finished:ok", "started:echo", "finished:ok", "started:t0000", "finished:ok", "started:add", "finished:invalid_arguments"}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range append([]string{secret, password, ghToken, apiKey, nested}, plain...) {
		if bytes.Contains(raw, []byte(sec)) {
			t.Errorf("the journal file holds %q", sec)
		}
	}
	if !bytes.Contains(raw, []byte("[REDACTED sha256:")) {
		t.Error("no redaction marker in the journal")
	}
}

// counting is an in-process server whose tools count their invocations.
type counting struct {
	srv   *mcp.Server
	calls atomic.Int64
	flaky atomic.Int64
}

func newCounting(t *testing.T) *counting {
	cs := &counting{srv: mcp.NewServer(&mcp.Implementation{Name: "counting", Version: "1"}, nil)}
	echo := func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		cs.calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	}
	mcp.AddTool(cs.srv, &mcp.Tool{Name: "echo", Description: "echo"}, echo)
	mcp.AddTool(cs.srv, &mcp.Tool{Name: "delete", Description: "deletes"}, echo)
	// lookup (read-only) and write (not annotated) lose their connection
	// on their first invocation: the session closes with the call in
	// flight.
	dropFirst := func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		cs.calls.Add(1)
		if cs.flaky.Add(1) == 1 {
			go req.Session.Close()
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done: " + in.Message}}}, nil, nil
	}
	mcp.AddTool(cs.srv, &mcp.Tool{Name: "lookup", Description: "read-only", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, dropFirst)
	mcp.AddTool(cs.srv, &mcp.Tool{Name: "write", Description: "writes"}, dropFirst)
	return cs
}

// TestCallPolicyAndApprover: ask consults the approver; its allow and deny
// are journaled as call.decided before anything is sent; a denied call
// never reaches the server; never denies; the user's own approval is
// recorded as such.
func TestCallPolicyAndApprover(t *testing.T) {
	j, adapter := openJournal(t)
	srv := newCounting(t)
	var asked []runtime.ApprovalRequest
	opts := fastOpts(configOf())
	opts.InProcess = map[string]*mcp.Server{"mem": srv.srv}
	opts.CallPolicy = config.PolicyAsk
	opts.Approver = func(ctx context.Context, req runtime.ApprovalRequest) (runtime.Approval, error) {
		asked = append(asked, req)
		if strings.Contains(string(req.Args), "please") {
			return runtime.Approval{Allow: true, By: "alice"}, nil
		}
		return runtime.Approval{By: "alice", Reason: "not polite"}, nil
	}
	m, _ := runtime.New(adapter, opts)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := t.Context()
	if r, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "please"}); err != nil || textOf(t, r) != "please" {
		t.Fatalf("allowed call: %v", err)
	}
	_, err := m.CallTool(ctx, "mcp__mem__echo", map[string]any{"message": "now"})
	var de *runtime.DeniedError
	if !errors.As(err, &de) || de.By != "approver:alice" || de.Reason != "not polite" {
		t.Fatalf("denied call: %v", err)
	}
	if _, err := m.CallToolWith(ctx, "mcp__mem__echo", map[string]any{"message": "cli"}, &runtime.CallOptions{UserApproved: "test"}); err != nil {
		t.Fatalf("user-approved call: %v", err)
	}
	if n := srv.calls.Load(); n != 2 {
		t.Errorf("the server saw %d calls, want 2 (the denied one never reached it)", n)
	}
	if len(asked) != 2 || asked[0].Tool != "echo" || asked[0].Server != "mem" || asked[0].DefHash == "" {
		t.Errorf("approver asked %+v", asked)
	}
	got, evs := callEvents(t, j, m.Session())
	want := []string{"decided:echo:allow:approver:alice", "started:echo", "finished:ok",
		"decided:echo:deny:approver:alice",
		"decided:echo:allow:user:test", "started:echo", "finished:ok"}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if d, ok := evs[0].Payload.(*events.CallDecided); !ok || d.DefHash == "" || d.Policy != "ask" {
		t.Errorf("decision %+v", evs[0].Payload)
	}
	if s, ok := evs[1].Payload.(*events.CallStarted); !ok || s.ApprovedBy != "approver:alice" || s.Policy != "ask" {
		t.Errorf("started %+v", evs[1].Payload)
	}
}

// TestCallPolicyFromConfig reads callPolicy and toolPolicies from a config
// file: never denies, always needs nobody.
func TestCallPolicyFromConfig(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"s": {"command": "`+bin+`", "callPolicy": "never",
		"toolPolicies": {"echo": "always"}, "toolTimeouts": {"slow": 300}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	lc := config.Load(config.Sources{Flags: []string{cfg}, Workspace: dir})
	if len(lc.Warnings) > 0 || lc.Specs["s"].Call.Policy != config.PolicyNever {
		t.Fatalf("config: %+v %q", lc.Specs["s"].Call, lc.Warnings)
	}
	j, adapter := openJournal(t)
	m, _ := runtime.New(adapter, fastOpts(func() config.Reading { return lc }))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := t.Context()
	if _, err := m.CallTool(ctx, "mcp__s__echo", map[string]any{"message": "x"}); err != nil {
		t.Errorf("echo (always): %v", err)
	}
	if _, err := m.CallTool(ctx, "mcp__s__counter", nil); !errors.Is(err, runtime.ErrCallDenied) {
		t.Errorf("counter (never): %v", err)
	}
	// A per-tool policy override lets slow through, with its own timeout.
	lc.Specs["s"] = withCall(lc.Specs["s"], config.CallSettings{ToolPolicies: map[string]config.CallPolicy{"slow": config.PolicyAlways},
		ToolTimeouts: map[string]time.Duration{"slow": 300 * time.Millisecond}})
	if err := m.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err := m.CallTool(ctx, "mcp__s__slow", map[string]any{"ms": 5000})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 3*time.Second {
		t.Errorf("slow: %v after %v", err, time.Since(t0))
	}
	got, _ := callEvents(t, j, m.Session())
	want := []string{"started:echo", "finished:ok", "decided:counter:deny:policy", "started:slow", "finished:timeout"}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// TestCallMaxResultCharsPerServer: a server's "maxResultChars" bounds its
// results instead of Options.MaxResultChars, in the rendered text and in
// CallResult.Bounded alike, and a reload that sets it to 0 lifts the
// bound; Result stays as the server sent it.
func TestCallMaxResultCharsPerServer(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"s": {"command": "`+bin+`", "maxResultChars": 40}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	lc := config.Load(config.Sources{Flags: []string{cfg}, Workspace: dir})
	_, adapter := openJournal(t)
	opts := fastOpts(func() config.Reading { return lc })
	opts.MaxResultChars = 1000
	m, _ := runtime.New(adapter, opts)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := m.CallToolWith(t.Context(), "mcp__s__big", map[string]any{"bytes": 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	marker := "[mcpledger: output truncated: 60 of 100 characters cut]"
	if r.Text != strings.Repeat("x", 40)+"\n"+marker || r.Chars != 100 || r.Cut != 60 {
		t.Errorf("rendered %q (chars %d, cut %d)", r.Text, r.Chars, r.Cut)
	}
	if len(r.Bounded.Content) != 2 || r.Bounded.Content[0].(*mcp.TextContent).Text != strings.Repeat("x", 40) ||
		r.Bounded.Content[1].(*mcp.TextContent).Text != marker || textOf(t, r.Result) != strings.Repeat("x", 100) {
		t.Errorf("bounded %+v, result %q", r.Bounded.Content, textOf(t, r.Result))
	}
	whole := 0
	lc.Specs["s"] = withCall(lc.Specs["s"], config.CallSettings{MaxResultChars: &whole})
	if err := m.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	r, err = m.CallToolWith(t.Context(), "mcp__s__big", map[string]any{"bytes": 2000}, nil)
	if err != nil || len(r.Text) != 2000 || r.Cut != 0 || r.Bounded != r.Result {
		t.Errorf("maxResultChars 0: %v, %d characters, cut %d, bounded is the result %v", err, len(r.Text), r.Cut, r.Bounded == r.Result)
	}
}

func withCall(s config.Spec, c config.CallSettings) config.Spec {
	s.Call = c
	return s
}

// TestCallRetriesOnlyWhenSafe: a connection lost with the call in flight
// is retried once after a reconnect for a read-only tool, and reported as
// an unknown outcome (no retry) for a tool that is not annotated.
func TestCallRetriesOnlyWhenSafe(t *testing.T) {
	for _, tc := range []struct {
		tool  string
		retry bool
	}{{"lookup", true}, {"write", false}} {
		t.Run(tc.tool, func(t *testing.T) {
			j, adapter := openJournal(t)
			srv := newCounting(t)
			opts := fastOpts(configOf())
			opts.InProcess = map[string]*mcp.Server{"mem": srv.srv}
			m, _ := runtime.New(adapter, opts)
			if _, err := m.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			r, err := m.CallTool(t.Context(), "mcp__mem__"+tc.tool, map[string]any{"message": "x"})
			got, evs := callEvents(t, j, m.Session())
			if tc.retry {
				if err != nil || textOf(t, r) != "done: x" || srv.calls.Load() != 2 {
					t.Fatalf("retried call: %v %v (server saw %d)", err, r, srv.calls.Load())
				}
				want := []string{"started:lookup", "finished:lost", "started:lookup:retry", "finished:ok"}
				if !slices.Equal(got, want) {
					t.Errorf("calls %q, want %q", got, want)
				}
				if f := evs[1].Payload.(*events.CallFinished); !f.Retrying || !strings.Contains(f.Error, "read-only") {
					t.Errorf("first try %+v", f)
				}
				if s := evs[2].Payload.(*events.CallStarted); s.RetryOf != evs[0].Payload.(*events.CallStarted).CallID || s.Attempt <= evs[0].Payload.(*events.CallStarted).Attempt {
					t.Errorf("retry %+v", s)
				}
				return
			}
			if !errors.Is(err, runtime.ErrOutcomeUnknown) || srv.calls.Load() != 1 {
				t.Fatalf("unsafe call: %v (server saw %d)", err, srv.calls.Load())
			}
			if want := []string{"started:write", "finished:lost"}; !slices.Equal(got, want) {
				t.Errorf("calls %q, want %q", got, want)
			}
		})
	}
}

// TestCallCancelledByCaller: the caller's cancel ends the call at once, is
// journaled as cancelled, and is not retried; the session stays up.
func TestCallCancelledByCaller(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	c, s := stdio("s", bin, nil)
	m, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := m.CallTool(ctx, "mcp__s__slow", map[string]any{"ms": 10000})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > 2*time.Second {
		t.Fatalf("cancelled call: %v after %v", err, time.Since(t0))
	}
	// The server got notifications/cancelled: its handler ended, so the
	// next call is answered at once by the same process.
	r, err := m.CallTool(t.Context(), "mcp__s__counter", nil)
	if err != nil || textOf(t, r) != "2" {
		t.Fatalf("counter: %v %v", err, r)
	}
	got, _ := callEvents(t, j, m.Session())
	if want := []string{"started:slow", "finished:cancelled", "started:counter", "finished:ok"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// TestCallInvalidArgumentsNeverSent: a schema violation is refused
// locally, names the field, and the server never counts the call.
func TestCallInvalidArgumentsNeverSent(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	c, s := stdio("s", bin, nil)
	m, _ := runtime.New(adapter, fastOpts(configOf(c, s)))
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err := m.CallTool(t.Context(), "mcp__s__add", map[string]any{"a": "one", "b": 2})
	var ae *runtime.ArgumentsError
	if !errors.As(err, &ae) || ae.Field != "a" {
		t.Fatalf("add: %v", err)
	}
	r, err := m.CallTool(t.Context(), "mcp__s__counter", nil)
	if err != nil || textOf(t, r) != "1" {
		t.Errorf("the server saw the invalid call: counter %v %v", err, r)
	}
}

// TestCallLargeResults: a 1 MB result is rendered to MaxResultChars with
// a marker and journaled capped; a 100 MB result, over MaxMessageBytes, is
// cut as it streams: the call gets its first MaxResultChars characters
// with the marker naming the whole size, the journal says it was cut in
// transit and how large it was, the session stays up, and the process's
// peak RSS stays far below the result's size.
func TestCallLargeResults(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	j, adapter := openJournal(t)
	c, s := stdio("s", bin, nil)
	opts := fastOpts(configOf(c, s))
	opts.CallTimeout = 60 * time.Second
	m, _ := runtime.New(adapter, opts)
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := m.CallToolWith(t.Context(), "mcp__s__big", map[string]any{"bytes": 1_000_000}, &runtime.CallOptions{Wrap: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Chars != 1_000_000 || r.Cut != 1_000_000-guard.DefaultMaxResultChars ||
		!strings.Contains(r.Text, "[mcpledger: output truncated: 950000 of 1000000 characters cut]") ||
		!strings.HasPrefix(r.Text, `<mcp_tool_output server="s" tool="big" trust="untrusted">`) {
		t.Errorf("rendered %d chars, cut %d: %.80q…%q", r.Chars, r.Cut, r.Text, r.Text[max(0, len(r.Text)-120):])
	}
	if testing.Short() {
		return
	}
	// The bound is on what the process holds, not on how late the GC
	// runs: with the default GOGC the heap may reach twice what is live
	// before a collection, and the peak swung 41–65 MiB between runs.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	runtimegc.GC()
	hwm0 := vmHWM(t)
	t0 := time.Now()
	r, err = m.CallToolWith(t.Context(), "mcp__s__big", map[string]any{"bytes": 100_000_000}, nil)
	took := time.Since(t0)
	hwm1 := vmHWM(t)
	if err != nil {
		t.Fatalf("100 MB: %v", err)
	}
	t.Logf("100 MB result: cut in %v; peak RSS %d MiB before, %d MiB after", took, hwm0>>20, hwm1>>20)
	const marker = "[mcpledger: output truncated: 99950000 of 100000000 characters cut]"
	want := strings.Repeat("x", guard.DefaultMaxResultChars)
	if r.Chars != 100_000_000 || r.Cut != 100_000_000-guard.DefaultMaxResultChars || r.Text != want+"\n"+marker {
		t.Errorf("rendered %d chars, cut %d: %.80q…%q", r.Chars, r.Cut, r.Text, r.Text[max(0, len(r.Text)-120):])
	}
	if b := texts(r.Bounded); len(b) != 2 || b[0] != want || b[1] != marker {
		t.Errorf("bounded result: %d blocks, last %q", len(b), b[len(b)-1])
	}
	// The frame cap holds at most MaxMessageBytes (16 MiB) of it; the
	// race detector multiplies memory, so the bound holds without it.
	if grew := hwm1 - hwm0; !raceEnabled && grew > 64<<20 {
		t.Errorf("peak RSS grew by %d MiB while a 100 MB result streamed", grew>>20)
	}
	st := state(m.Snapshot(), "s")
	if r, err := m.CallTool(t.Context(), "mcp__s__echo", map[string]any{"message": "still here"}); err != nil || textOf(t, r) != "still here" || st.Attempt != 1 {
		t.Errorf("session after the oversized result: %v %v attempt %d", err, r, st.Attempt)
	}
	got, evs := callEvents(t, j, m.Session())
	if want := []string{"started:big", "finished:ok", "started:big", "finished:ok", "started:echo", "finished:ok"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if f := evs[1].Payload.(*events.CallFinished); !f.Result.Truncated || len(f.Result.Text) != runtime.DefaultJournalCap || f.Result.Size < 1_000_000 || len(f.Result.SHA256) != 64 || f.CutChars != 950_000 || f.WireBytes != 0 {
		t.Errorf("journaled 1 MB result: truncated %v, %d bytes of %d, cut %d, wire %d", f.Result.Truncated, len(f.Result.Text), f.Result.Size, f.CutChars, f.WireBytes)
	}
	// The journal keeps what arrived, whole, and says it was cut in
	// transit from a message of the result's size plus its envelope.
	f := evs[3].Payload.(*events.CallFinished)
	// The server speaks 2026-07-28 (auto): its result carries its
	// serverInfo in _meta and resultType.
	wantResult := `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcptest","version":"0.0.1"}},` +
		`"content":[{"type":"text","text":"` + want + `"}],"resultType":"complete"}`
	if f.Result.Text != wantResult || f.Result.Truncated || f.WireBytes <= 100_000_000 || f.WireBytes > 100_000_200 ||
		f.RenderedChars != 100_000_000 || f.CutChars != 100_000_000-guard.DefaultMaxResultChars {
		t.Errorf("journaled 100 MB result: %d bytes (truncated %v), wire %d, rendered %d, cut %d: %s",
			len(f.Result.Text), f.Result.Truncated, f.WireBytes, f.RenderedChars, f.CutChars, strings.ReplaceAll(f.Result.Text, want, "<want>"))
	}
}

// texts returns the texts of a result's text blocks.
func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			out = append(out, t.Text)
		}
	}
	return out
}

// vmHWM returns the process's peak resident set size.
func vmHWM(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
