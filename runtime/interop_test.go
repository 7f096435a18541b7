package runtime_test

// Interop tests against a real third-party MCP server: the reference
// server-everything from npm (TypeScript SDK 1.32.2), at the version pinned
// by .ci/peers.sh, run with node directly (no npx wrapper process). The
// facts asserted here were measured against that pin (real-peers.md in the
// shared docs). Where it is not installed, or node is missing, they skip.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

const (
	everythingPkg = "@modelcontextprotocol/server-everything"
	// everythingVersion is the pin in .ci/peers.sh.
	everythingVersion = "2026.8.31"
	// everythingTools is how many tools server-everything offers a client
	// that advertises no capabilities (mcpledger's): the 12 it always
	// registers plus simulate-research-query, which it registers after
	// notifications/initialized whatever the client supports. A client with
	// roots would also get get-roots-list; with sampling or elicitation,
	// more.
	everythingTools = 13
)

// everything locates node and the pinned server-everything's entry point
// under $MCPLEDGER_PEERS_DIR (default ~/.cache/mcpledger-peers, as in
// .ci/peers.sh). It skips the test if either is missing.
func everything(t *testing.T) (node, script string) {
	t.Helper()
	dir := os.Getenv("MCPLEDGER_PEERS_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Skipf("server-everything not installed: run .ci/peers.sh (needs npm); no home directory: %v", err)
		}
		dir = filepath.Join(home, ".cache", "mcpledger-peers")
	}
	pkg := filepath.Join(dir, "node_modules", filepath.FromSlash(everythingPkg))
	script = filepath.Join(pkg, "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		t.Skip("server-everything not installed: run .ci/peers.sh (needs npm)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: server-everything needs node")
	}
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pj struct{ Version string }
	if err := json.Unmarshal(b, &pj); err != nil {
		t.Fatalf("%s: %v", filepath.Join(pkg, "package.json"), err)
	}
	if pj.Version != everythingVersion {
		t.Fatalf("%s %s is installed in %s; the tests are written against %s: run .ci/peers.sh", everythingPkg, pj.Version, dir, everythingVersion)
	}
	return node, script
}

// textOf returns the text of a result's only content block.
func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil || len(res.Content) != 1 {
		t.Fatalf("want one content block, got %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("want text content, got %T", res.Content[0])
	}
	return tc.Text
}

// liveTools returns the catalog names of server's live (not deferred) tools.
func liveTools(v *runtime.View, server string) []string {
	var out []string
	for _, e := range v.Catalog.Tools {
		if e.Server == server && !e.Deferred {
			out = append(out, e.Name)
		}
	}
	return out
}

// waitCatalog waits until server's tools are in the catalog and checks
// that they are exactly the no-capabilities set. server-everything
// registers its conditional tools on notifications/initialized and
// announces them with tools/list_changed; the first tools/list had them in
// every run measured, but nothing orders the two, so the test waits.
func waitCatalog(t *testing.T, m *runtime.Manager, server string) *runtime.View {
	t.Helper()
	v := waitFor(t, m, server+"'s tools", func(v *runtime.View) bool {
		return len(liveTools(v, server)) >= everythingTools
	})
	names := liveTools(v, server)
	if len(names) != everythingTools {
		t.Errorf("%s has %d tools, want %d (a client without capabilities): %v", server, len(names), everythingTools, names)
	}
	p := "mcp__" + server + "__"
	for _, want := range []string{"echo", "get-sum", "simulate-research-query"} {
		if !slices.Contains(names, p+want) {
			t.Errorf("catalog lacks %s%s: %v", p, want, names)
		}
	}
	// Tools server-everything only registers for clients with roots,
	// sampling or elicitation: mcpledger advertises none.
	for _, unwanted := range []string{"get-roots-list", "trigger-sampling-request", "trigger-elicitation-request"} {
		if slices.Contains(names, p+unwanted) {
			t.Errorf("catalog has %s%s: the client advertised a capability it does not implement", p, unwanted)
		}
	}
	if e, ok := v.Tool(p + "get-sum"); !ok || e.Tool != "get-sum" {
		t.Errorf("%sget-sum does not map to the server's get-sum: %+v", p, e)
	}
	return v
}

// callEcho calls server's echo tool and checks server-everything's reply.
func callEcho(t *testing.T, m *runtime.Manager, server, msg string) {
	t.Helper()
	res, err := m.CallTool(t.Context(), "mcp__"+server+"__echo", map[string]any{"message": msg})
	if err != nil {
		t.Fatalf("echo on %s: %v", server, err)
	}
	if got := textOf(t, res); res.IsError || got != "Echo: "+msg {
		t.Errorf("echo on %s = %q (isError %v), want %q", server, got, res.IsError, "Echo: "+msg)
	}
}

func TestInteropEverythingStdio(t *testing.T) {
	node, script := everything(t)
	j, adapter := openJournal(t)
	c, s := stdio("everything", node, []string{script, "stdio"})
	o := fastOpts(configOf(c, s))
	o.TerminateGrace = 0 // Close is timed with the default escalation
	m, err := runtime.New(adapter, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() }) // after a failure; Close is idempotent
	rep, err := m.Start(t.Context())
	if err != nil || !slices.Equal(rep.Ready, []string{"everything"}) {
		t.Fatalf("start: %v %+v; status %+v", err, rep, m.Status())
	}
	v := waitCatalog(t, m, "everything")
	st := state(v, "everything")
	if st.PID == 0 || st.ProtocolVersion != "2025-11-25" || st.ServerName != "mcp-servers/everything" {
		t.Errorf("status %+v", st)
	}

	callEcho(t, m, "everything", "hello ledger")
	res, err := m.CallTool(t.Context(), "mcp__everything__get-sum", map[string]any{"a": 2, "b": 3.5})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); res.IsError || got != "The sum of 2 and 3.5 is 5.5." {
		t.Errorf("get-sum = %q (isError %v)", got, res.IsError)
	}
	// Invalid arguments are refused locally against the tool's input
	// schema (the TypeScript SDK would answer an isError result): the
	// error names the field, and the server never sees the call.
	_, err = m.CallTool(t.Context(), "mcp__everything__get-sum", map[string]any{"a": "two"})
	var ae *runtime.ArgumentsError
	if !errors.As(err, &ae) || !strings.Contains(ae.Field, "a") {
		t.Fatalf("invalid arguments: %v", err)
	}
	// The call path records the definition hash it called.
	if e, ok := m.Snapshot().Tool("mcp__everything__get-sum"); !ok || e.DefHash == "" {
		t.Errorf("get-sum entry %+v", e)
	}

	// server-everything exits on stdin EOF once its event loop is idle, but
	// not while simulated logging runs (a 5 s interval timer): then only
	// the escalation to SIGTERM ends it.
	res, err = m.CallTool(t.Context(), "mcp__everything__toggle-simulated-logging", nil)
	if err != nil || res.IsError || !strings.HasPrefix(textOf(t, res), "Started simulated") {
		t.Fatalf("toggle-simulated-logging: %v %+v", err, res)
	}
	t0 := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	closeTook := time.Since(t0)
	if closeTook > 3*time.Second {
		t.Errorf("Close took %v", closeTook)
	}
	if left, _ := runtimetest.ProcessesInGroup(st.PID); len(left) > 0 {
		t.Errorf("processes left in group %d after Close: %v", st.PID, left)
	}

	// The journal, complete once Close has returned.
	var spawned, handshake time.Time
	var hs *events.HandshakeCompleted
	var resources *events.ResourcesListed
	var prompts *events.PromptsListed
	var exited *events.ProcessExited
	var initialTools int
	tools := map[string]string{} // call ID → tool
	var calls []string           // tool:outcome, in order
	for _, e := range sessionEvents(t, j, m.Session()) {
		switch p := e.Payload.(type) {
		case *events.ProcessSpawned:
			spawned = time.Unix(0, e.Time)
		case *events.HandshakeCompleted:
			hs, handshake = p, time.Unix(0, e.Time)
		case *events.ToolsListed:
			if p.Trigger == "initial" {
				initialTools = len(p.Tools)
			}
		case *events.ResourcesListed:
			resources = p
		case *events.PromptsListed:
			prompts = p
		case *events.CallStarted:
			tools[p.CallID] = p.Tool
		case *events.CallFinished:
			calls = append(calls, tools[p.CallID]+":"+p.Outcome)
		case *events.ProcessExited:
			exited = p
		}
	}
	if hs == nil || hs.ProtocolVersion != "2025-11-25" || hs.ServerVersion != "2.0.0" || !hs.Capabilities.ToolsListChanged {
		t.Errorf("handshake.completed %+v", hs)
	}
	if resources == nil || resources.Error != "" || len(resources.Resources) == 0 || len(resources.Templates) == 0 {
		t.Fatalf("resources.listed %+v", resources)
	}
	if prompts == nil || prompts.Error != "" || len(prompts.Prompts) == 0 {
		t.Fatalf("prompts.listed %+v", prompts)
	}
	want := []string{"echo:ok", "get-sum:ok", "get-sum:invalid_arguments", "toggle-simulated-logging:ok"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls journaled %v, want %v", calls, want)
	}
	// The escalation closed stdin, waited the grace, then SIGTERMed the
	// group; node has no SIGTERM handler there and dies of it.
	if exited == nil || !exited.Expected || exited.Signal != "terminated" {
		t.Errorf("process.exited %+v, want expected, by SIGTERM", exited)
	}
	t.Logf("spawn → initialized %v; %d tools at the first list; %d resources, %d templates, %d prompts; Close %v",
		handshake.Sub(spawned).Round(time.Millisecond), initialTools,
		len(resources.Resources), len(resources.Templates), len(prompts.Prompts), closeTook.Round(time.Millisecond))
}

func TestInteropEverythingCrashReconnects(t *testing.T) {
	node, script := everything(t)
	j, adapter := openJournal(t)
	c, s := stdio("everything", node, []string{script, "stdio"})
	m, err := runtime.New(adapter, fastOpts(configOf(c, s)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	first := state(waitCatalog(t, m, "everything"), "everything")
	if first.State != events.StateReady || first.PID == 0 {
		t.Fatalf("not ready: %+v", first)
	}
	// No tool crashes server-everything: kill its process group.
	if err := syscall.Kill(-first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	v := waitFor(t, m, "everything back with a new process", func(v *runtime.View) bool {
		s := state(v, "everything")
		return s.State == events.StateReady && s.PID != first.PID && s.PID != 0
	})
	if s := state(v, "everything"); s.Attempt <= first.Attempt {
		t.Errorf("attempt %d after the crash, was %d", s.Attempt, first.Attempt)
	}
	waitCatalog(t, m, "everything")
	callEcho(t, m, "everything", "after the crash")
	if left := runtimetest.WaitGone(t.Context(), []int{first.PID}); len(left) > 0 {
		t.Errorf("killed process still alive: %v", left)
	}
	var exited *events.ProcessExited
	for _, e := range sessionEvents(t, j, m.Session()) {
		if p, ok := e.Payload.(*events.ProcessExited); ok && p.PID == first.PID {
			exited = p
		}
	}
	if exited == nil || exited.Expected || exited.Signal != "killed" {
		t.Errorf("process.exited of the killed server: %+v", exited)
	}
}

func TestInteropEverythingHTTP(t *testing.T) {
	node, script := everything(t)
	for _, tc := range []struct {
		mode, path string
		transport  events.Transport
	}{
		{"streamableHttp", "/mcp", events.TransportHTTP},
		{"sse", "/sse", events.TransportSSE},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			base := startEverythingHTTP(t, node, script, tc.mode)
			_, adapter := openJournal(t)
			c, s := remote("everything", tc.transport, base+tc.path, nil)
			m, err := runtime.New(adapter, fastOpts(configOf(c, s)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			rep, err := m.Start(t.Context())
			if err != nil || !slices.Equal(rep.Ready, []string{"everything"}) {
				t.Fatalf("start: %v %+v; status %+v", err, rep, m.Status())
			}
			v := waitCatalog(t, m, "everything")
			if pv := state(v, "everything").ProtocolVersion; pv != "2025-11-25" {
				t.Errorf("negotiated %q", pv)
			}
			callEcho(t, m, "everything", "over "+tc.mode)
			t0 := time.Now()
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(t0); d > 3*time.Second {
				t.Errorf("Close took %v", d)
			}
		})
	}
}

// loopbackPreload is loaded with node -r: server-everything's HTTP modes
// listen on $PORT on all interfaces and have no host option, so a listen
// without a host is made to bind 127.0.0.1. It reports the bound address
// on stderr, which lets the test use PORT=0 and learn the port without a
// race for a "free" one.
const loopbackPreload = `'use strict';
// mcpledger interop tests: bind host-less listen() calls to loopback.
const net = require('net');
const listen = net.Server.prototype.listen;
const isPort = (v) => typeof v === 'number' || (typeof v === 'string' && /^\d+$/.test(v));
net.Server.prototype.listen = function (...args) {
  if (args.length === 0 || args[0] == null || typeof args[0] === 'function') {
    args.splice(0, args[0] == null ? 1 : 0, 0, '127.0.0.1');
  } else if (isPort(args[0]) && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  } else if (typeof args[0] === 'object' && args[0].path === undefined && args[0].host === undefined &&
             args[0].fd === undefined && args[0].handle === undefined && args[0]._handle === undefined) {
    args[0] = Object.assign({}, args[0], { host: '127.0.0.1' });
  }
  this.once('listening', () => {
    const a = this.address();
    if (a && typeof a === 'object') process.stderr.write('` + listeningLine + `' + a.address + ' ' + a.port + '\n');
  });
  return listen.apply(this, args);
};
`

const listeningLine = "mcpledger-interop: listening on "

// startEverythingHTTP runs server-everything in mode (streamableHttp or sse)
// on a loopback port in its own process group, killed at cleanup, and
// returns its base URL.
func startEverythingHTTP(t *testing.T, node, script, mode string) string {
	t.Helper()
	preload := filepath.Join(t.TempDir(), "loopback.cjs")
	if err := os.WriteFile(preload, []byte(loopbackPreload), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "-r", preload, script, mode)
	cmd.Env = append(os.Environ(), "PORT=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	addr := make(chan string, 1)
	out := &lineLog{onLine: func(line string) {
		if a, ok := strings.CutPrefix(line, listeningLine); ok {
			select {
			case addr <- a:
			default:
			}
		}
	}}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("server-everything %s output:\n%s", mode, out.String())
		}
	})
	var a string
	select {
	case a = <-addr:
	case <-exited:
		t.Fatalf("server-everything %s exited before listening:\n%s", mode, out.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("server-everything %s not listening after 10 s:\n%s", mode, out.String())
	}
	host, port, _ := strings.Cut(a, " ")
	if host != "127.0.0.1" {
		t.Fatalf("server-everything %s listens on %q: the loopback preload did not apply", mode, a)
	}
	base := "http://" + net.JoinHostPort(host, port)
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 2*time.Second)
	if err != nil {
		t.Fatalf("server-everything %s: %v", mode, err)
	}
	nc.Close()
	return base
}

// lineLog keeps a process's output and calls onLine for each full line.
type lineLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	onLine  func(string)
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() < 1<<20 {
		l.buf.Write(p)
	}
	l.partial = append(l.partial, p...)
	consumed := 0
	for {
		i := bytes.IndexByte(l.partial[consumed:], '\n')
		if i < 0 {
			break
		}
		l.onLine(strings.TrimRight(string(l.partial[consumed:consumed+i]), "\r"))
		consumed += i + 1
	}
	l.partial = append(l.partial[:0], l.partial[consumed:]...)
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestInteropMixedVersions: one session holding go-sdk servers that speak
// 2026-07-28 (over stdio, and over stateless Streamable HTTP) and the npm
// server-everything, which speaks 2025-11-25 only, each left at protocol
// version auto: each is spoken to in its own version (as journaled on its
// handshake and listing), and a tool of each answers.
func TestInteropMixedVersions(t *testing.T) {
	node, script := everything(t)
	bin := runtimetest.BuildServer(t)
	url, _ := runtimetest.StartHTTP(t, bin, []string{"MCPTEST_NAME=remote"}, "-stateless")
	ce, se := stdio("everything", node, []string{script, "stdio"})
	cg, sg := stdio("gostdio", bin, nil, "MCPTEST_NAME=gostdio")
	ch, sh := remote("gohttp", events.TransportHTTP, url, nil)
	j, adapter := openJournal(t)
	m, err := runtime.New(adapter, fastOpts(configOf(ce, se, cg, sg, ch, sh)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	rep, err := m.Start(t.Context())
	if err != nil || len(rep.Ready) != 3 {
		t.Fatalf("start: %v %+v; status %+v", err, rep, m.Status())
	}
	waitCatalog(t, m, "everything")
	want := map[string]string{"everything": "2025-11-25", "gostdio": "2026-07-28", "gohttp": "2026-07-28"}
	v := m.Snapshot()
	evs := sessionEvents(t, j, m.Session())
	for name, pv := range want {
		if st := state(v, name); st.ProtocolVersion != pv {
			t.Errorf("%s speaks %q, want %s", name, st.ProtocolVersion, pv)
		}
		hs := payloadsOf[*events.HandshakeCompleted](evs, name)
		ls := payloadsOf[*events.ToolsListed](evs, name)
		if len(hs) == 0 || hs[0].ProtocolVersion != pv || len(ls) == 0 || ls[0].ProtocolVersion != pv {
			t.Errorf("%s: the journal records handshake %+v, listing %+v; want %s", name, hs, ls, pv)
		}
		msg := "hello " + name
		res, err := m.CallTool(t.Context(), "mcp__"+name+"__echo", map[string]any{"message": msg})
		if err != nil || res.IsError || !strings.HasSuffix(textOf(t, res), msg) { // everything prefixes "Echo: "
			t.Errorf("echo on %s: %v %+v", name, err, res)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
