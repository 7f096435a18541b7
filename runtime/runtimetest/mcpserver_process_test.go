package runtimetest

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ---- the test server as a process: crashes, exits, hangs, stderr, signals, children ----

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
	// stderr is copied by its own goroutine: give it a moment.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && s.stderr.String() != want; {
		time.Sleep(10 * time.Millisecond)
	}
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
	// stderr is copied by its own goroutine: the line may land after the
	// handshake completed.
	var m []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m = childPidRE.FindStringSubmatch(stderr.String()); m != nil {
			break
		}
	}
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
