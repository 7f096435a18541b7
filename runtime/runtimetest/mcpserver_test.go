package runtimetest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pinned is the protocol every session in these tests speaks (see
// docs/go-sdk-notes.md §0).
var pinned = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// stdioServer is one test server process driven over stdio by go-sdk.
type stdioServer struct {
	cmd    *exec.Cmd
	stderr *lineWriter
	cs     *mcp.ClientSession // nil if Connect failed
}

// serverCmd is the command for a stdio test server in its own process
// group, with env added to ours and stderr captured.
func serverCmd(t *testing.T, env ...string) (*exec.Cmd, *lineWriter) {
	t.Helper()
	cmd := exec.Command(BuildServer(t))
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	stderr := &lineWriter{}
	cmd.Stderr = stderr
	return cmd, stderr
}

// startStdio starts the test server with env and connects a go-sdk client
// to it (opts may be nil). It returns Connect's error rather than failing,
// for the modes where failing is the point. The process group is killed
// and the session closed (which reaps the process) at cleanup.
func startStdio(t *testing.T, timeout time.Duration, opts *mcp.ClientOptions, env ...string) (*stdioServer, error) {
	t.Helper()
	cmd, stderr := serverCmd(t, env...)
	s := &stdioServer{cmd: cmd, stderr: stderr}
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	if opts.Capabilities == nil {
		opts.Capabilities = &mcp.ClientCapabilities{}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "runtimetest", Version: "0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 200 * time.Millisecond}, pinned)
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if cs != nil {
			_ = cs.Close()
		}
		if t.Failed() {
			t.Logf("stderr of test server:\n%s", trimLog(stderr.String(), 4096))
		}
	})
	s.cs = cs
	return s, err
}

// mustStart is startStdio for servers that must come up.
func mustStart(t *testing.T, opts *mcp.ClientOptions, env ...string) *stdioServer {
	t.Helper()
	s, err := startStdio(t, 10*time.Second, opts, env...)
	if err != nil {
		t.Fatalf("Connect: %v\nstderr:\n%s", err, s.stderr)
	}
	return s
}

// call calls a tool with a 10 s deadline.
func call(cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// textOf is the text of a result's only content block.
func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content blocks, want 1: %+v", len(res.Content), res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func mustText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := call(cs, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: isError result: %s", name, textOf(t, res))
	}
	return textOf(t, res)
}

func TestTools(t *testing.T) {
	t.Parallel()
	s := mustStart(t, nil, "MCPTEST_NAME=alpha", "MCPTEST_SECRET=s3cret")
	cs := s.cs
	if got := cs.InitializeResult().ServerInfo.Name; got != "alpha" {
		t.Errorf("server name %q, want alpha", got)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != "2025-11-25" {
		t.Errorf("protocol %q, want 2025-11-25", got)
	}
	if got := mustText(t, cs, "echo", map[string]any{"message": "hello"}); got != "hello" {
		t.Errorf("echo = %q", got)
	}
	res, err := call(cs, "add", map[string]any{"a": 2, "b": 3.5})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != `{"sum":5.5}` {
		t.Errorf("add text = %q", got)
	}
	if m, ok := res.StructuredContent.(map[string]any); !ok || m["sum"] != 5.5 {
		t.Errorf("add structured = %#v", res.StructuredContent)
	}
	if got := mustText(t, cs, "env", map[string]any{"name": "MCPTEST_SECRET"}); got != "s3cret" {
		t.Errorf("env = %q", got)
	}
	if res, err := call(cs, "env", map[string]any{"name": "MCPTEST_UNSET_FOR_SURE"}); err != nil || !res.IsError {
		t.Errorf("env of an unset variable: %v, %+v; want an isError result", err, res)
	}
	if res, err := call(cs, "fail", nil); err != nil || !res.IsError || textOf(t, res) != "failed as asked" {
		t.Errorf("fail: %v, %+v; want isError \"failed as asked\"", err, res)
	}
	if got := mustText(t, cs, "big", map[string]any{"bytes": 1 << 20}); len(got) != 1<<20 || strings.Trim(got, "x") != "" {
		t.Errorf("big: got %d bytes", len(got))
	}
	var werr *jsonrpc.Error
	if _, err := call(cs, "nope", nil); !errors.As(err, &werr) {
		t.Errorf("unknown tool: %v, want a JSON-RPC error", err)
	}
	// echo, add, env, env, fail, big, nope, and this one.
	if got := mustText(t, cs, "counter", nil); got != "8" {
		t.Errorf("counter = %s, want 8", got)
	}
	// A clean server exits 0 when stdin closes.
	if err := cs.Close(); err != nil {
		t.Errorf("Close: %v, want nil (exit status 0)", err)
	}
}

func TestSlowHonoursCancellation(t *testing.T) {
	t.Parallel()
	s := mustStart(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 10_000}})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("slow with a 100ms deadline: %v after %v", err, time.Since(start))
	}
	if got := mustText(t, s.cs, "slow", map[string]any{"ms": 20}); got != "slept 20 ms" {
		t.Errorf("slow = %q", got)
	}
}

func TestToolsChange(t *testing.T) {
	t.Parallel()
	changed := make(chan struct{}, 100)
	opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}}
	s := mustStart(t, opts, "MCPTEST_TOOLS_CHANGE_MS=40")
	for i := range 2 {
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("list_changed %d did not arrive", i+1)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := s.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return strings.HasPrefix(tl.Name, "dyn_") }) {
		t.Errorf("no dyn_ tool listed after list_changed")
	}
}

func TestListChangedStorm(t *testing.T) {
	t.Parallel()
	const n = 200
	var got atomic.Int64
	reached := make(chan struct{})
	opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		if got.Add(1) == n {
			close(reached)
		}
	}}
	mustStart(t, opts, "MCPTEST_LIST_CHANGED_STORM="+strconv.Itoa(n))
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatalf("got %d list_changed notifications, want at least %d", got.Load(), n)
	}
}

// baseTools is the number of tools the server always has.
const baseTools = 8

func TestToolCountAndPages(t *testing.T) {
	t.Parallel()
	t.Run("10000", func(t *testing.T) {
		t.Parallel()
		s := mustStart(t, nil, "MCPTEST_TOOL_COUNT=10000")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n := 0
		for tool, err := range s.cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 && tool.Name != "add" {
				t.Errorf("first tool %q", tool.Name)
			}
			n++
		}
		if n != 10000+baseTools {
			t.Errorf("Tools yielded %d, want %d", n, 10000+baseTools)
		}
	})
	t.Run("page-size", func(t *testing.T) {
		t.Parallel()
		s := mustStart(t, nil, "MCPTEST_PAGE_SIZE=3")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := s.cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) != 3 || res.NextCursor == "" {
			t.Errorf("first page: %d tools, cursor %q; want 3 and a cursor", len(res.Tools), res.NextCursor)
		}
		n := 0
		for _, err := range s.cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != baseTools {
			t.Errorf("Tools yielded %d, want %d", n, baseTools)
		}
	})
}

// TestGarbageStdout pins what go-sdk's stdio client does with lines on
// stdout that are not JSON-RPC: it does not skip them. The first one fails
// the read loop, the pending initialize fails with the decode error, and
// the session is gone. The error is neither ErrConnectionClosed nor EOF.
func TestGarbageStdout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, err string }{
		{"1", `calling "initialize": invalid character 'm' looking for beginning of value`},
		{"json", `calling "initialize": invalid message version tag ""; expected "2.0"`},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			s, err := startStdio(t, 5*time.Second, nil, "MCPTEST_GARBAGE_STDOUT="+c.mode)
			if err == nil || err.Error() != c.err {
				t.Fatalf("Connect: %v, want %s", err, c.err)
			}
			var se *json.SyntaxError
			if c.mode == "1" && !errors.As(err, &se) {
				t.Errorf("error %v does not hold a *json.SyntaxError", err)
			}
			if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
				t.Errorf("error %v unexpectedly classifies as a closed connection", err)
			}
			// Connect closed stdin; the server exited 0 on EOF and was reaped.
			if s.cmd.ProcessState == nil || !s.cmd.ProcessState.Success() {
				t.Errorf("process state %v, want exit status 0", s.cmd.ProcessState)
			}
		})
	}
}

// TestDupAndBadTools pins what go-sdk's client makes of duplicate names and
// broken input schemas in tools/list: it passes them all through, except a
// tool with invalid x-mcp-header annotations, which ListTools drops (logging
// to the client's Logger). Calling any of the extra tools is an unknown-tool
// JSON-RPC error, since the server never registered them.
func TestDupAndBadTools(t *testing.T) {
	t.Parallel()
	s := mustStart(t, nil, "MCPTEST_DUP_TOOLS=1", "MCPTEST_BAD_SCHEMA=1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := s.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	schemas := map[string]any{}
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		schemas[tl.Name] = tl.InputSchema
	}
	want := []string{"add", "big", "counter", "echo", "env", "exit", "fail", "slow",
		"echo", "bad_type_string", "bad_not_object", "bad_null", "bad_ref", "bad name!"}
	if !slices.Equal(names, want) {
		t.Errorf("listed %q,\nwant %q (bad_header dropped)", names, want)
	}
	if schemas["bad_not_object"] != 42.0 || schemas["bad_null"] != nil {
		t.Errorf("schemas: bad_not_object %#v, bad_null %#v", schemas["bad_not_object"], schemas["bad_null"])
	}
	n := 0
	for _, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != len(want) {
		t.Errorf("Tools yielded %d, want %d", n, len(want))
	}
	if got := mustText(t, s.cs, "echo", map[string]any{"message": "m"}); got != "m" {
		t.Errorf("echo = %q", got)
	}
	var werr *jsonrpc.Error
	for _, name := range []string{"bad_type_string", "bad name!"} {
		if _, err := call(s.cs, name, nil); !errors.As(err, &werr) || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("calling %q: %v, want unknown tool", name, err)
		}
	}
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	bin := BuildServer(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"streamable", nil},
		{"stateless", []string{"-stateless"}},
		{"sse", []string{"-sse"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url, _ := StartHTTP(t, bin, []string{"MCPTEST_NAME=web"}, c.args...)
			var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: url}
			if c.name == "sse" {
				tr = &mcp.SSEClientTransport{Endpoint: url}
			}
			// The SSE session lives as long as Connect's ctx (go-sdk-notes
			// §6.6), so this ctx outlives the test body.
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			t.Cleanup(cancel)
			client := mcp.NewClient(&mcp.Implementation{Name: "runtimetest", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
			cs, err := client.Connect(ctx, tr, pinned)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			if got := cs.InitializeResult().ServerInfo.Name; got != "web" {
				t.Errorf("server name %q", got)
			}
			if got := mustText(t, cs, "echo", map[string]any{"message": "over " + c.name}); got != "over "+c.name {
				t.Errorf("echo = %q", got)
			}
			if got := mustText(t, cs, "counter", nil); got != "2" {
				t.Errorf("counter = %s, want 2", got)
			}
		})
	}

	t.Run("crash-after", func(t *testing.T) {
		t.Parallel()
		url, cmd := StartHTTP(t, bin, []string{"MCPTEST_CRASH_AFTER=1"})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "runtimetest", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, pinned)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		mustText(t, cs, "echo", map[string]any{"message": "one"})
		if _, err := call(cs, "echo", map[string]any{"message": "two"}); err == nil {
			t.Error("the second call succeeded")
		}
		if left := WaitGone(ctx, []int{cmd.Process.Pid}); left != nil {
			t.Error("server still alive after the second call")
		}
	})

	t.Run("hang-initialize", func(t *testing.T) {
		t.Parallel()
		url, _ := StartHTTP(t, bin, []string{"MCPTEST_HANG_INITIALIZE=1"})
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "runtimetest", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, pinned)
		if err == nil {
			cs.Close()
			t.Fatal("Connect succeeded")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Connect: %v, want deadline exceeded", err)
		}
	})
}
