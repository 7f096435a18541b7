package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestDeadServerDetectedInEitherVersion: the health check finds a server
// that dies (killed) or stops answering (hung: SIGSTOP, its pipes and
// sockets open) as soon on a 2026-07-28 session as on a 2025-11-25 one,
// over stdio and over stateless Streamable HTTP, and never declares a
// healthy server of either version dead. On 2026-07-28 go-sdk's Ping is
// answered "method not found" (the version removed ping) or refused
// without _meta; the runtime probes with server/discover instead.
//
// The bound is the same for both versions: what the options allow (the
// failures in a row the decider waits for, each a ping interval plus its
// timeout), with slack for a loaded machine.
func TestDeadServerDetectedInEitherVersion(t *testing.T) {
	const (
		interval = 100 * time.Millisecond
		timeout  = 300 * time.Millisecond
		failures = 2
	)
	bound := time.Duration(failures)*(interval+timeout) + 2*time.Second
	bin := runtimetest.BuildServer(t)
	took := map[string]time.Duration{}
	for _, transport := range []string{"stdio", "http"} {
		for _, fault := range []string{"killed", "hung"} {
			for _, version := range []string{"2025-11-25", "2026-07-28"} {
				name := transport + "/" + fault + "/" + version
				t.Run(name, func(t *testing.T) {
					took[name] = detectDeath(t, bin, transport, fault, version, func(o *runtime.Options) {
						o.PingInterval, o.PingTimeout = interval, timeout
						o.Decider.PingFailures = failures
						o.Retry = runtime.RetryOptions{Attempts: 1}
					}, bound)
				})
			}
		}
	}
	var lines []string
	for _, transport := range []string{"stdio", "http"} {
		for _, fault := range []string{"killed", "hung"} {
			k := transport + "/" + fault + "/"
			lines = append(lines, fmt.Sprintf("%s: 2025-11-25 %v, 2026-07-28 %v", strings.TrimSuffix(k, "/"),
				took[k+"2025-11-25"].Round(time.Millisecond), took[k+"2026-07-28"].Round(time.Millisecond)))
		}
	}
	t.Logf("death detected after:\n%s", strings.Join(lines, "\n"))
}

// detectDeath runs one case and returns how long after the fault the
// server left ready.
func detectDeath(t *testing.T, bin, transport, fault, version string, opts func(*runtime.Options), bound time.Duration) time.Duration {
	var c events.ServerConfig
	var s config.Spec
	var pid int
	switch transport {
	case "stdio":
		c, s = stdio("dying", bin, nil)
	default:
		url, cmd := runtimetest.StartHTTP(t, bin, nil, "-stateless")
		c, s = remote("dying", events.TransportHTTP, url, nil)
		pid = cmd.Process.Pid
	}
	if version != "2026-07-28" { // 2026-07-28: auto, the default
		c.ProtocolVersion = version
		c.Hash = events.ConfigHash(&c)
		s.Config = c
	}
	j, adapter := openJournal(t)
	o := fastOpts(configOf(c, s))
	o.Decider.MaxAttempts = 1
	opts(o)
	m, err := runtime.New(adapter, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := state(waitFor(t, m, "ready", func(v *runtime.View) bool { return state(v, "dying").State == events.StateReady }), "dying")
	if st.ProtocolVersion != version {
		t.Fatalf("the session speaks %q, want %s", st.ProtocolVersion, version)
	}
	if pid == 0 {
		pid = st.PID
	}
	// Healthy: a dozen health checks pass.
	time.Sleep(12 * o.PingInterval)
	evs := sessionEvents(t, j, m.Session())
	if pf := payloadsOf[*events.PingFailed](evs, "dying"); len(pf) > 0 {
		t.Fatalf("a healthy server failed %d health checks: %+v", len(pf), pf[0])
	}
	if res, err := m.CallTool(t.Context(), "mcp__dying__echo", map[string]any{"message": "alive"}); err != nil || res.IsError {
		t.Fatalf("call before the fault: %v %+v", err, res)
	}
	sig := syscall.SIGKILL
	if fault == "hung" {
		sig = syscall.SIGSTOP
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	views, stop := m.Subscribe()
	defer stop()
	var down projections.ServerStatus
	for down.State == "" || down.State == events.StateReady {
		select {
		case v := <-views:
			down = state(v, "dying")
		case <-ctx.Done():
			t.Fatalf("%s server still %s %v after the fault (bound %v)", fault, state(m.Snapshot(), "dying").State, time.Since(t0), bound)
		}
	}
	detected := time.Since(t0)
	evs = sessionEvents(t, j, m.Session())
	switch {
	case fault == "hung" && len(payloadsOf[*events.PingFailed](evs, "dying")) < 2:
		t.Errorf("a hung server left ready without two failed health checks: %s", strings.Join(kinds(evs, "dying"), " "))
	case fault == "killed" && transport == "stdio" && len(payloadsOf[*events.ProcessExited](evs, "dying")) == 0:
		t.Errorf("a killed stdio server's exit was not journaled: %s", strings.Join(kinds(evs, "dying"), " "))
	}
	t.Logf("%s %s %s: %s after %v", transport, fault, version, down.State, detected.Round(time.Millisecond))
	return detected
}
