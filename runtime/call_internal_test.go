package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/guard"
)

type nopJournal struct{}

func (nopJournal) Append(context.Context, uuid.UUID, []events.Event) error { return nil }
func (nopJournal) AppendLater(uuid.UUID, []events.Event) func(context.Context) error {
	return func(context.Context) error { return nil }
}
func (nopJournal) ReadAll(context.Context, uint64, func(events.Event) error) error { return nil }

// realErrors produces the errors go-sdk really returns: an unknown tool on
// a Go server, a call on a closed session.
func realErrors(t *testing.T) (unknown, closed error) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, unknown = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "nope"})
	cs.Close()
	_, closed = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo"})
	return unknown, closed
}

func TestCallOutcome(t *testing.T) {
	m, err := New(nopJournal{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	unknown, closed := realErrors(t)
	text := func(s string, isErr bool) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}, IsError: isErr}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ro := true
	for _, tc := range []struct {
		name        string
		ctx         context.Context
		res         *mcp.CallToolResult
		err         error
		outcome     string
		is          error // errors.Is on the returned error; nil: no error
		lost        lostInfo
		annotations events.ToolAnnotations
	}{
		{name: "ok", res: text("hi", false), outcome: events.OutcomeOK},
		{name: "tool error", res: text("boom", true), outcome: events.OutcomeToolError},
		{name: "unknown tool, go-sdk JSON-RPC error", err: unknown, outcome: events.OutcomeUnknownTool, is: ErrUnknownTool},
		{name: "unknown tool, TypeScript isError result", res: text("MCP error -32602: Tool t not found", true), outcome: events.OutcomeUnknownTool, is: ErrUnknownTool},
		{name: "another tool's not-found is a tool error", res: text("File t.txt not found", true), outcome: events.OutcomeToolError},
		{name: "caller cancelled", ctx: cancelled, err: context.Canceled, outcome: events.OutcomeCancelled, is: context.Canceled},
		{name: "timeout", err: context.DeadlineExceeded, outcome: events.OutcomeTimeout, is: context.DeadlineExceeded},
		{name: "closed before sending", err: closed, outcome: events.OutcomeError, is: mcp.ErrConnectionClosed, lost: lostInfo{retriable: true, undelivered: true}},
		{name: "EOF in flight", err: fmt.Errorf("calling %q: %w", "tools/call", io.EOF), outcome: events.OutcomeLost, is: ErrOutcomeUnknown, lost: lostInfo{retriable: true}},
		{name: "EOF in flight, read-only tool", err: fmt.Errorf("calling %q: %w", "tools/call", io.EOF), outcome: events.OutcomeLost, is: ErrOutcomeUnknown,
			lost: lostInfo{retriable: true}, annotations: events.ToolAnnotations{ReadOnly: &ro}},
		{name: "too large", err: fmt.Errorf("calling %q: %w", "tools/call", &jsonrpc.Error{Code: codeTooLarge, Message: "mcpledger: the response was 9 bytes"}), outcome: events.OutcomeError, is: ErrResultTooLarge},
		{name: "protocol error", err: fmt.Errorf("calling %q: %w", "tools/call", &jsonrpc.Error{Code: -32603, Message: "internal"}), outcome: events.OutcomeError, is: errAny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			cl := &call{entry: projections.Entry{Server: "s", Tool: "t", Annotations: tc.annotations}, name: "mcp__s__t"}
			c := &conn{relist: make(chan string, 1)}
			fin := &events.CallFinished{}
			_, err := func() (r *mcp.CallToolResult, err error) {
				r, err, lost := m.outcome(ctx, cl, c, tc.res, tc.err, time.Second, fin)
				if lost != tc.lost {
					t.Errorf("lost %+v, want %+v", lost, tc.lost)
				}
				return r, err
			}()
			if fin.Outcome != tc.outcome {
				t.Errorf("outcome %q, want %q (error %q)", fin.Outcome, tc.outcome, fin.Error)
			}
			switch {
			case tc.is == nil && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.is == errAny && err == nil, tc.is != nil && tc.is != errAny && !errors.Is(err, tc.is):
				t.Errorf("error %v, want %v", err, tc.is)
			}
			if tc.outcome == events.OutcomeUnknownTool && len(c.relist) == 0 {
				t.Error("no re-list requested")
			}
			if tc.outcome == events.OutcomeLost && !strings.Contains(err.Error(), "may or may not have acted") {
				t.Errorf("lost error does not say the outcome is unknown: %v", err)
			}
		})
	}
	if !safeToRepeat(events.ToolAnnotations{ReadOnly: &ro}) || safeToRepeat(events.ToolAnnotations{}) {
		t.Error("safeToRepeat")
	}
}

var errAny = errors.New("any error")

func TestRetriable(t *testing.T) {
	rejected := fmt.Errorf("calling %q: %w", "ping", fmt.Errorf("%w: %w", &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"}, &url.Error{Op: "Post", URL: "http://x", Err: syscall.ECONNREFUSED}))
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rejected, true},
		{syscall.ECONNRESET, true},
		{context.DeadlineExceeded, false},
		{io.EOF, false},
		{fmt.Errorf("%w: x", mcp.ErrConnectionClosed), false},
		{&jsonrpc.Error{Code: -32601, Message: "method not found"}, false},
		{errors.New("something else"), false},
	} {
		if got := retriable(tc.err); got != tc.want {
			t.Errorf("retriable(%v) = %v", tc.err, got)
		}
	}
	n := 0
	err := retry(t.Context(), RetryOptions{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}, func(context.Context) error {
		n++
		return rejected
	})
	if n != 3 || err != rejected {
		t.Errorf("tries %d err %v", n, err)
	}
	n = 0
	_ = retry(t.Context(), RetryOptions{Attempts: 3, Backoff: time.Millisecond}, func(context.Context) error {
		n++
		return io.EOF
	})
	if n != 1 {
		t.Errorf("a dead session was retried %d times", n)
	}
}

// TestFrameCap: messages pass unchanged; an oversized response is
// replaced by an error response to the same id (go-sdk and TypeScript key
// orders), an oversized notification is dropped, and memory stays bounded
// while a large frame streams through.
func TestFrameCap(t *testing.T) {
	big := strings.Repeat("x", 5000)
	in := `{"jsonrpc":"2.0","id":1,"result":{"ok":true}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"` + big + `"}]}}` + "\n" +
		`{"result":{"content":[{"type":"text","text":"` + big + `"}]},"jsonrpc":"2.0","id":"s-3"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + big + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"result":{}}` + "\n"
	var dropped []string
	f := newFrameCap(io.NopCloser(strings.NewReader(in)), 1000, func(size int64, answered bool) {
		dropped = append(dropped, fmt.Sprint(size, answered))
	})
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	if lines[0] != `{"jsonrpc":"2.0","id":1,"result":{"ok":true}}` || lines[3] != `{"jsonrpc":"2.0","id":4,"result":{}}` {
		t.Errorf("pass-through changed: %q %q", lines[0], lines[3])
	}
	for i, id := range []string{`"id":2`, `"id":"s-3"`} {
		l := lines[1+i]
		if !strings.Contains(l, id) || !strings.Contains(l, `"code":-32050`) || !strings.Contains(l, "over the 1000-byte limit") {
			t.Errorf("replacement %d: %s", i, l)
		}
		msg, err := jsonrpc.DecodeMessage([]byte(l))
		if r, ok := msg.(*jsonrpc.Response); err != nil || !ok || !tooLarge(r.Error) {
			t.Errorf("replacement %d does not decode as a too-large response: %v %T", i, err, msg)
		}
	}
	if len(dropped) != 3 || dropped[2] != fmt.Sprint(len(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`+big+`"}}`)+1, false) {
		t.Errorf("dropped %q", dropped)
	}
}

func TestFrameCapBoundedMemory(t *testing.T) {
	const size = 64 << 20
	r := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"`),
		io.LimitReader(repeatReader('x'), size), strings.NewReader(`"}]}}`+"\n"))
	f := newFrameCap(io.NopCloser(r), 1<<20, nil)
	var ms0, ms1 runtimeMemStats
	readMem(&ms0)
	out, err := io.ReadAll(f)
	readMem(&ms1)
	if err != nil || !bytes.Contains(out, []byte(`"id":7`)) {
		t.Fatalf("%v %s", err, out)
	}
	if grew := ms1.TotalAlloc - ms0.TotalAlloc; grew > 8<<20 {
		t.Errorf("allocated %d MiB to stream a %d MiB frame", grew>>20, size>>20)
	}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

type runtimeMemStats = goruntime.MemStats

func readMem(m *runtimeMemStats) { goruntime.ReadMemStats(m) }

// TestResultJSON: the journal's encoding of a result decodes to the same
// value as go-sdk's own.
func TestResultJSON(t *testing.T) {
	for _, res := range []*mcp.CallToolResult{
		{Content: []mcp.Content{&mcp.TextContent{Text: "plain"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "quote \" backslash \\ nl \n tab \t cr \r nul \x00 bell \x07 é 中 \u2028 <&>"}}, IsError: true},
		{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{Data: []byte{1, 2}, MIMEType: "image/png"}}},
		{Content: []mcp.Content{}, StructuredContent: map[string]any{"sum": 3.5}},
		{Content: []mcp.Content{&mcp.TextContent{Text: "bad \xff utf8"}}},
	} {
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		got := resultJSON(res)
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		_ = json.Unmarshal(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// BenchmarkCallPathSteps measures the call path's own per-call work for a
// 10 KB text result, without the server, the transport or the decider
// loop: argument encoding and validation, redaction and capping of
// arguments and result for the journal, rendering, the injection scan and
// wrapping. Its ns/op is the path's own CPU cost (target ≤ 50 µs).
//
// The result reaches the journal two ways: result=wire is stdio and
// in-process servers, whose result bytes the connection keeps as the
// server sent them (wireTransport: one copy, made as the response is
// read); result=reencoded is Streamable HTTP and SSE, whose decoded
// result is encoded again (resultJSON).
func BenchmarkCallPathSteps(b *testing.B) {
	line := `The build of /srv/app/src/main.go took 4.2 s; see {"status":"ok","tests":118,"failed":0} and https://example.com/ci/1234. `
	text := strings.Repeat(line, 10240/len(line)+1)[:10240]
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	wire, err := json.Marshal(res) // as a go-sdk server writes it
	if err != nil {
		b.Fatal(err)
	}
	schema := `{"additionalProperties":false,"properties":{"message":{"type":"string"}},"required":["message"],"type":"object"}`
	spec := config.Spec{Env: []string{"API_TOKEN=tok-1234567890abcdef", "LOG_LEVEL=info"}}
	args := map[string]any{"message": "hello ledger"}
	red := guard.NewRedactor(spec.Secrets()) // once per connection, as newConn does
	for _, tc := range []struct {
		name   string
		result func() []byte
	}{
		{"result=wire", func() []byte { return bytes.Clone(wire) }},
		{"result=reencoded", func() []byte { return resultJSON(res) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				a, _ := json.Marshal(args)
				if err := guard.ValidateArgs("mcp__mem__read", schema, a); err != nil {
					b.Fatal(err)
				}
				_ = blobOf(red.Redact(a), DefaultJournalCap)
				r := guard.RenderResult(res, guard.DefaultMaxResultChars)
				if guard.DetectInjection(r.Text) != nil {
					b.Fatal("signal")
				}
				_ = guard.WrapOutput("mem", "read", r.Text)
				_ = blobOfOwned(red.Redact(tc.result()), DefaultJournalCap)
			}
			// CPU time (user+system, all threads, GC included) per call:
			// steadier than wall time on a loaded machine.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
