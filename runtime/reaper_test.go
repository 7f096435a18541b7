package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// startGroup starts `sh -c 'sleep 300 & sleep 300'` as the leader of a new
// process group and waits until the group has its three members.
func startGroup(t *testing.T) (pgid int, members []int, wait func()) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 300 & sleep 300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid = cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	deadline := time.Now().Add(5 * time.Second)
	for {
		members, _ = runtimetest.ProcessesInGroup(pgid)
		if len(members) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d has %v", pgid, members)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return pgid, members, func() { _ = cmd.Wait() }
}

// TestReaperKillsListedGroupsWhenThePipeEnds runs the reaper (this test
// binary in reaper mode, as mcpledger's binary is) and ends its pipe as
// mcpledger's death would: every group still listed is killed, children
// included; a group taken off the list is left alone.
func TestReaperKillsListedGroupsWhenThePipeEnds(t *testing.T) {
	r := newReaper(os.Args[0], slog.New(slog.NewTextHandler(io.Discard, nil)))
	listed, listedMembers, waitListed := startGroup(t)
	forgotten, forgottenMembers, waitForgotten := startGroup(t)
	r.watch(listed)
	r.watch(forgotten)
	r.forget(forgotten)
	helper := r.cmd.Process.Pid
	if !runtimetest.Alive(helper) {
		t.Fatal("the reaper did not start")
	}

	r.close() // the pipe ends: as if mcpledger had died
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if left := runtimetest.WaitGone(ctx, listedMembers); len(left) > 0 {
		t.Errorf("processes of the listed group %d outlived the reaper's pipe: %v", listed, left)
	}
	waitListed()
	for _, p := range forgottenMembers {
		if !runtimetest.Alive(p) {
			t.Errorf("process %d of group %d, taken off the list, was killed", p, forgotten)
		}
	}
	_ = syscall.Kill(-forgotten, syscall.SIGKILL)
	waitForgotten()
	if runtimetest.Alive(helper) {
		t.Errorf("the reaper (pid %d) is still running after close", helper)
	}
}

// TestReaperIgnoresWhatCouldHurt checks the helper's side alone: lines
// that would make it signal every process it may (kill(-1)), its caller's
// group (kill(0)), or nothing parseable are skipped; the group listed
// after them is still killed at the end of the input.
func TestReaperIgnoresWhatCouldHurt(t *testing.T) {
	pgid, members, wait := startGroup(t)
	in := "+1\n+0\n+-5\nx\n\n+abc\n-\n+" + fmt.Sprint(pgid) + "\n"
	done := make(chan int, 1)
	go func() { done <- runReaperOn(t, in) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("runReaper did not return at the end of its input")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if left := runtimetest.WaitGone(ctx, members); len(left) > 0 {
		t.Errorf("group %d listed last was not killed: %v", pgid, left)
	}
	wait()
}

// runReaperOn runs the helper's loop in a child process (it kills groups,
// and the test process must not be one of them), fed in.
func runReaperOn(t *testing.T, in string) int {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), shimEnv+"="+reaperMode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Error(err)
		return -1
	}
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return -1
	}
	_, _ = io.WriteString(w, in)
	_ = w.Close()
	_ = cmd.Wait()
	return cmd.ProcessState.ExitCode()
}
