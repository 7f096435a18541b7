package runtimetest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
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

// waitSession waits up to 5 s for the session to end and returns Wait's
// error.
func waitSession(t *testing.T, cs *mcp.ClientSession) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cs.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("session did not end within 5s")
		return nil
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1000
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

func TestCrashOnStart(t *testing.T) {
	t.Parallel()
	s, err := startStdio(t, 10*time.Second, nil, "MCPTEST_CRASH_ON_START=1")
	if err == nil {
		t.Fatal("Connect succeeded")
	}
	if !strings.Contains(s.stderr.String(), "mcptest: crashing on start as asked\n") {
		t.Errorf("stderr %q lacks the crash message", s.stderr)
	}
	// The failed Connect closed the transport, which reaped the process.
	if s.cmd.ProcessState == nil || s.cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("process state %v, want exit status 3", s.cmd.ProcessState)
	}
}

func TestCrashAfterN(t *testing.T) {
	t.Parallel()
	s := mustStart(t, nil, "MCPTEST_CRASH_AFTER=2")
	for _, m := range []string{"one", "two"} {
		if got := mustText(t, s.cs, "echo", map[string]any{"message": m}); got != m {
			t.Errorf("echo = %q", got)
		}
	}
	// The process exits right after writing the second result.
	if err := waitSession(t, s.cs); exitCode(err) != 4 {
		t.Errorf("Wait: %v, want exit status 4", err)
	}
	if _, err := call(s.cs, "echo", map[string]any{"message": "three"}); err == nil {
		t.Error("a third call succeeded")
	}
	if !strings.Contains(s.stderr.String(), "mcptest: exiting after result 2 as asked") {
		t.Errorf("stderr %q lacks the exit message", s.stderr)
	}
}

func TestExitTool(t *testing.T) {
	t.Parallel()
	s := mustStart(t, nil)
	if _, err := call(s.cs, "exit", map[string]any{"code": 7}); !errors.Is(err, io.EOF) {
		t.Errorf("exit call: %v, want EOF", err)
	}
	if err := waitSession(t, s.cs); exitCode(err) != 7 {
		t.Errorf("Wait: %v, want exit status 7", err)
	}
}

func TestHangInitialize(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := startStdio(t, 500*time.Millisecond, nil, "MCPTEST_HANG_INITIALIZE=1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect: %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Connect gave up after %v", d)
	}
}

func TestSlowStartAndStderrLines(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := mustStart(t, nil, "MCPTEST_SLOW_START_MS=300", "MCPTEST_STDERR_LINES=3")
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("Connect took %v, want at least the 300ms slow start", d)
	}
	want := "mcptest: stderr line 1 of 3\nmcptest: stderr line 2 of 3\nmcptest: stderr line 3 of 3\n"
	if got := s.stderr.String(); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

// initializeRaw speaks just enough MCP over raw pipes to know the server
// is serving: one initialize round trip.
func initializeRaw(t *testing.T, stdin io.Writer, stdout io.Reader) {
	t.Helper()
	_, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`+"\n")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := stdout.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize answer %q, %v", buf[:n], err)
	}
}

func TestIgnoreEOFAndSIGTERM(t *testing.T) {
	t.Parallel()
	env := []string{"MCPTEST_IGNORE_EOF=1", "MCPTEST_IGNORE_SIGTERM=1"}

	t.Run("raw", func(t *testing.T) {
		t.Parallel()
		cmd, _ := serverCmd(t, env...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL); <-waited })
		initializeRaw(t, stdin, stdout)

		stdin.Close()
		time.Sleep(150 * time.Millisecond)
		if !Alive(pid) {
			t.Fatal("server died when stdin closed")
		}
		if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
		if !Alive(pid) {
			t.Fatal("server died of SIGTERM")
		}
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-waited:
			waited <- err // for the cleanup
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("Wait: %v, want killed by SIGKILL", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("SIGKILL did not end the server")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if left := WaitGone(ctx, []int{pid}); left != nil {
			t.Errorf("still alive: %v", left)
		}
	})

	// What go-sdk's CommandTransport makes of it: Close closes stdin, waits
	// TerminateDuration (200ms), sends SIGTERM, waits again, then SIGKILLs.
	t.Run("sdk-close", func(t *testing.T) {
		t.Parallel()
		s := mustStart(t, nil, env...)
		start := time.Now()
		err := s.cs.Close()
		if d := time.Since(start); d < 400*time.Millisecond || d > 3*time.Second {
			t.Errorf("Close took %v, want about 2×200ms", d)
		}
		if err == nil || !strings.Contains(err.Error(), "signal: killed") {
			t.Errorf("Close: %v, want signal: killed", err)
		}
	})
}

var childPidRE = regexp.MustCompile(`mcptest: child pid (\d+)\n`)

func childPid(t *testing.T, stderr *lineWriter) int {
	t.Helper()
	m := childPidRE.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no child pid on stderr %q", stderr)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

func TestSpawnChild(t *testing.T) {
	t.Parallel()
	t.Run("group-kill", func(t *testing.T) {
		t.Parallel()
		s := mustStart(t, nil, "MCPTEST_SPAWN_CHILD=1")
		leader, child := s.cmd.Process.Pid, childPid(t, s.stderr)
		got, err := ProcessesInGroup(leader)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{min(leader, child), max(leader, child)}; !slices.Equal(got, want) {
			t.Fatalf("group %d holds %v, want %v", leader, got, want)
		}
		if err := syscall.Kill(-leader, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if left := WaitGone(ctx, []int{leader, child}); left != nil {
			t.Errorf("alive after killing the group: %v", left)
		}
		// go-sdk reaps the leader once it sees EOF; the grandchild is
		// re-parented and reaped by PID 1 (if PID 1 reaps: log, not fail).
		if err := waitSession(t, s.cs); err == nil {
			t.Error("session ended without an exit error")
		}
		var live, zombies []int
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if live, zombies, err = GroupMembers(leader); err != nil || (live == nil && zombies == nil) {
				break
			}
		}
		if err != nil || live != nil || slices.Contains(zombies, leader) {
			t.Errorf("group %d after kill and Wait: live %v, zombies %v, err %v", leader, live, zombies, err)
		} else if zombies != nil {
			t.Logf("zombies left in group %d, not reaped by PID 1: %v", leader, zombies)
		}
	})

	// The wrapper problem (go-sdk-notes §6.5): a grandchild holding the
	// stdio pipes keeps the session open after the leader dies.
	t.Run("inherit-leader-only", func(t *testing.T) {
		t.Parallel()
		s := mustStart(t, nil, "MCPTEST_SPAWN_CHILD=inherit")
		leader, child := s.cmd.Process.Pid, childPid(t, s.stderr)
		if err := syscall.Kill(leader, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.cs.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("session ended (%v) although the grandchild holds stdout", err)
		case <-time.After(300 * time.Millisecond):
		}
		if !Alive(child) {
			t.Fatal("grandchild died with the leader")
		}
		if err := syscall.Kill(-leader, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("session did not end after killing the group")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if left := WaitGone(ctx, []int{leader, child}); left != nil {
			t.Errorf("alive after killing the group: %v", left)
		}
	})
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
