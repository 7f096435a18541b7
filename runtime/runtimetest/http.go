package runtimetest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
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
	url, cmd, err := TryStartHTTP(tb, bin, env, extraArgs...)
	if err != nil {
		tb.Fatal(err)
	}
	return url, cmd
}

// TryStartHTTP is StartHTTP, but a server that exits before it listens (a
// port still in use, say) is returned as an error carrying its stderr
// instead of failing tb. Its cleanup is registered either way.
func TryStartHTTP(tb testing.TB, bin string, env []string, extraArgs ...string) (string, *exec.Cmd, error) {
	tb.Helper()
	args := append([]string{"-http", "127.0.0.1:0"}, extraArgs...)
	// The cleanup below keeps cmd: it must not be a result, which the
	// error returns set to nil.
	cmd := exec.Command(bin, args...)
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
		return "", nil, fmt.Errorf("runtimetest: starting %s: %w", bin, err)
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
		return "http://" + a + path, cmd, nil
	case <-exited:
		return "", nil, fmt.Errorf("runtimetest: HTTP server exited before listening (%v); stderr:\n%s", waitErr, trimLog(stderr.String(), 4096))
	case <-timer.C:
		return "", nil, fmt.Errorf("runtimetest: HTTP server did not report %q within 10s; stderr:\n%s", listeningPrefix+"ADDR", trimLog(stderr.String(), 4096))
	}
}

// AddrOutsideEphemeral returns a free 127.0.0.1 address whose port lies
// below the kernel's ephemeral range (net.ipv4.ip_local_port_range), for a
// test that restarts a server on the same address. A port the kernel
// picked (port 0) is ephemeral: once its server is killed, any socket's
// dial may take it as its local port, and the restarted server's bind
// then fails with "address already in use". Below the range, only a
// listener asking for it by number can.
func AddrOutsideEphemeral(tb testing.TB) string {
	tb.Helper()
	low := 32768 // Linux's default when the range cannot be read
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	from := max(1024, low-16384)
	if low-from < 64 {
		tb.Skipf("runtimetest: the ephemeral range starts at %d: no room below it", low)
	}
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(from+rand.IntN(low-from)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = ln.Close()
		return addr
	}
	tb.Fatalf("runtimetest: no free port in [%d, %d) after 100 tries", from, low)
	return ""
}
