package runtimetest

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listeningPrefix starts the stderr line on which the test server reports
// its HTTP address.
const listeningPrefix = "mcptest: listening on "

// StartHTTP starts the test server binary bin in HTTP mode on a free port
// of 127.0.0.1 and returns the endpoint URL and the running command.
//
// env is added to the test process's environment (use it for MCPTEST_*
// modes); extraArgs follow "-http 127.0.0.1:0" on the command line, e.g.
// "-stateless" or "-sse". The URL is http://HOST:PORT/sse with -sse and
// http://HOST:PORT/mcp otherwise (the server answers on any path). The port
// is the one the server reports on stderr once it is listening, so there is
// no race for it. The process runs in its own process group, which is
// killed with SIGKILL (and the process reaped) at tb.Cleanup; StartHTTP
// fails the test if the server exits or does not report an address within
// 10 s. If the test failed, the server's stderr is logged at cleanup.
//
// StartHTTP reaps the process itself: do not call cmd.Wait or read
// cmd.ProcessState. To see the process die, use Alive or WaitGone on
// cmd.Process.Pid.
func StartHTTP(tb testing.TB, bin string, env []string, extraArgs ...string) (url string, cmd *exec.Cmd) {
	tb.Helper()
	args := append([]string{"-http", "127.0.0.1:0"}, extraArgs...)
	cmd = exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	addr := make(chan string, 1)
	stderr := &lineWriter{onLine: func(line string) {
		if a, ok := strings.CutPrefix(line, listeningPrefix); ok {
			select {
			case addr <- strings.TrimSpace(a):
			default:
			}
		}
	}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("runtimetest: starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if tb.Failed() {
			tb.Logf("runtimetest: stderr of HTTP server %d:\n%s", cmd.Process.Pid, trimLog(stderr.String(), 4096))
		}
	})
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case a := <-addr:
		path := "/mcp"
		if slices.Contains(extraArgs, "-sse") || slices.Contains(extraArgs, "--sse") {
			path = "/sse"
		}
		return "http://" + a + path, cmd
	case <-exited:
		tb.Fatalf("runtimetest: HTTP server exited before listening (%v); stderr:\n%s", waitErr, trimLog(stderr.String(), 4096))
	case <-timer.C:
		tb.Fatalf("runtimetest: HTTP server did not report %q within 10s; stderr:\n%s", listeningPrefix+"ADDR", trimLog(stderr.String(), 4096))
	}
	return "", nil
}
