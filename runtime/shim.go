package runtime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

// shimEnv marks a process started as a server shim.
const shimEnv = "MCPLEDGER_SHIM"

// RunShimIfRequested turns this process into a server shim if the runtime
// started it as one, and then never returns. A program that embeds the
// runtime calls it first thing in main and sets [Options.ShimPath] to its
// own executable; mcpledger's CLI does.
//
// Why a shim: a stdio server runs in its own process group so that stopping
// it reaches its children too (a wrapper such as `sh -c` or npx). But if
// mcpledger itself is killed (kill -9), nothing stops the group: the
// kernel's parent-death signal reaches only the direct child. The shim is
// that direct child and the group's leader; it starts the server, holds no
// pipe, and when mcpledger dies the kernel signals it, and it kills the
// whole group. Signals sent by mcpledger's own shutdown escalation reach
// the whole group anyway, so the shim leaves those to the server, and it
// exits the way the server did (same code, or the same signal).
func RunShimIfRequested() {
	if os.Getenv(shimEnv) != "1" {
		return
	}
	os.Exit(runShim(os.Args[1:]))
}

func runShim(args []string) int {
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintln(os.Stderr, "mcpledger shim: usage: -- COMMAND [ARGS...]")
		return 127
	}
	parent := os.Getppid()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, shimEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "mcpledger shim: %v\n", err)
		return 127
	}
	// Only the server holds the protocol pipes: when it ends, mcpledger sees
	// EOF at once.
	os.Stdin.Close()
	os.Stdout.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // ends when the server does; the process exits right after
	orphaned := func() bool { return os.Getppid() != parent }
	if orphaned() { // mcpledger died before the parent-death signal was armed
		_ = syscall.Kill(0, syscall.SIGKILL)
	}
	for {
		select {
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					signal.Reset(ws.Signal())
					_ = syscall.Kill(os.Getpid(), ws.Signal())
					select {} // the signal ends the process
				}
				return ee.ExitCode()
			}
			if err != nil {
				return 1
			}
			return 0
		case <-sigs:
			if orphaned() {
				// mcpledger is gone: end the whole group, this shim included.
				_ = syscall.Kill(0, syscall.SIGKILL)
			}
			// Otherwise mcpledger's own escalation signalled the group; the
			// server got the signal too and decides what to do with it.
		}
	}
}
