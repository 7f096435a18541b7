package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestPlainCallAsSDK: a tool call the runtime sends itself around go-sdk's
// client (wire_call.go) ends as the same call through go-sdk's client
// does: the same result, error, outcome and journal records, for each
// way a call can end over stdio: a text result, a structured one, an
// isError result, a result bounded, a result cut in transit, one over
// the message limit, a timeout and a caller's cancel (the server hears
// of both: its handler ends), and the server exiting with the call in
// flight.
func TestPlainCallAsSDK(t *testing.T) {
	bin := runtimetest.BuildServer(t)
	type ending struct {
		err      string
		result   string // the result and its bounded form, as JSON
		journal  []string
		finished []string // call.finished's error and truncation
		after    string   // the server's answer to a call made next
	}
	scenarios := []struct {
		name, tool string
		args       map[string]any
		timeout    time.Duration // the call's context (0: none)
		next       string        // a tool called after it, to see the server's state
	}{
		{name: "text", tool: "echo", args: map[string]any{"message": "hello ledger"}},
		{name: "structured", tool: "add", args: map[string]any{"a": 2, "b": 3}},
		{name: "is-error", tool: "fail"},
		{name: "bounded", tool: "big", args: map[string]any{"bytes": 120_000}},
		{name: "cut-in-transit", tool: "big", args: map[string]any{"bytes": 300_000}},
		{name: "timeout", tool: "slow", args: map[string]any{"ms": 10_000}, timeout: 150 * time.Millisecond, next: "counter"},
		{name: "exit-in-flight", tool: "exit", args: map[string]any{"code": 3}},
	}
	run := func(t *testing.T, version string, sdk bool, tool string, args map[string]any, timeout time.Duration, next string) ending {
		j, adapter := openJournal(t)
		c, s := stdio("s", bin, nil)
		o := fastOpts(configOf(c, s))
		o.ProtocolVersion = version
		o.MaxMessageBytes = 200_000
		o.Decider.MaxAttempts = 1
		m := startCalls(t, adapter, o, sdk)
		ctx := t.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		var e ending
		r, err := m.CallToolWith(ctx, "mcp__s__"+tool, args, nil)
		if err != nil {
			e.err = err.Error()
		}
		if r != nil {
			b, _ := json.Marshal([]any{r.Result, r.Bounded, r.Rendered, r.Signals})
			e.result = string(b)
		}
		if next != "" {
			r, err := m.CallTool(t.Context(), "mcp__s__"+next, nil)
			e.after = fmt.Sprint(err)
			if err == nil {
				e.after = textOf(t, r)
			}
		}
		m.Close()
		var evs []events.Event
		e.journal, evs = callEvents(t, j, m.Session())
		for _, ev := range evs {
			if f, ok := ev.Payload.(*events.CallFinished); ok {
				e.finished = append(e.finished, fmt.Sprintf("%s|%+v", f.Error, f.Result))
			}
		}
		return e
	}
	for _, sc := range scenarios {
		for _, version := range []string{"2025-11-25", "2026-07-28"} {
			t.Run(sc.name+"/"+version, func(t *testing.T) {
				t.Parallel()
				plain := run(t, version, false, sc.tool, sc.args, sc.timeout, sc.next)
				sdk := run(t, version, true, sc.tool, sc.args, sc.timeout, sc.next)
				if gone(fmt.Sprint(plain)) != gone(fmt.Sprint(sdk)) {
					t.Errorf("plain call:\n%+v\ngo-sdk's client:\n%+v", plain, sdk)
				}
				if len(plain.journal) < 2 || !strings.HasPrefix(plain.journal[0], "started:"+sc.tool) {
					t.Errorf("journal %q", plain.journal)
				}
				t.Logf("%s: %q err=%q after=%q", sc.name, plain.journal, plain.err, plain.after)
			})
		}
	}
}

// startCalls starts a Manager over j with options o, closed when the
// test ends; with sdk, every call goes through go-sdk's client.
func startCalls(t *testing.T, j runtime.Journal, o *runtime.Options, sdk bool) *runtime.Manager {
	t.Helper()
	m, err := runtime.New(j, o)
	if err != nil {
		t.Fatal(err)
	}
	if sdk {
		runtime.SetSDKCalls(m)
	}
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// gone puts one word for the two ways a stdio server's exit reaches a
// call in flight, whichever path: its pipe's EOF, or the pipe closed
// under the reader once the process is reaped.
func gone(s string) string {
	return goneRE.ReplaceAllString(s, "$1<the server is gone>")
}

var goneRE = regexp.MustCompile(`(calling "tools/call": )(EOF|read \|0: file already closed)`)

// TestPlainCallCancelNotifies: a plain call given up on (its deadline,
// its caller's cancel) tells the server, as go-sdk's client does: the
// server's handler sees its context end.
func TestPlainCallCancelNotifies(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdk=%v", sdk), func(t *testing.T) {
			ended := make(chan error, 1)
			srv := mcp.NewServer(&mcp.Implementation{Name: "mem", Version: "1.0"}, nil)
			mcp.AddTool(srv, &mcp.Tool{Name: "wait", Description: "Waits until cancelled."},
				func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
					<-ctx.Done()
					ended <- ctx.Err()
					return nil, nil, ctx.Err()
				})
			_, adapter := openJournal(t)
			m := startCalls(t, adapter, &runtime.Options{InProcess: map[string]*mcp.Server{"mem": srv}, Seed: 1,
				PingInterval: -1, ProtocolVersion: "2025-11-25"}, sdk)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			res, err := m.CallTool(ctx, "mcp__mem__wait", nil)
			switch {
			case errors.Is(err, context.DeadlineExceeded):
			case sdk && err == nil && res.IsError:
				// go-sdk's client can take the handler's answer to the
				// cancel (a tool error) when it arrives as the deadline
				// passes (in 7 of 400 runs, before and after this test's
				// plain path): its race, not the plain call's.
			default:
				t.Fatalf("call: %v %+v", err, res)
			}
			select {
			case err := <-ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the handler's context ended with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server was not told of the cancel")
			}
		})
	}
}
