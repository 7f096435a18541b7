package runtimetest

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestAliveAndZombies(t *testing.T) {
	t.Parallel()
	if !Alive(os.Getpid()) {
		t.Error("Alive(self) = false")
	}
	for _, pid := range []int{0, -1, 1 << 30} {
		if Alive(pid) {
			t.Errorf("Alive(%d) = true", pid)
		}
	}

	// A sleeper in its own group: live, then a zombie until reaped.
	cmd := exec.Command(BuildServer(t))
	cmd.Env = append(os.Environ(), "MCPTEST_CHILD_SLEEP=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	if !Alive(pid) {
		t.Fatal("sleeper not alive")
	}
	if got, err := ProcessesInGroup(pid); err != nil || !slices.Equal(got, []int{pid}) {
		t.Fatalf("ProcessesInGroup = %v, %v; want [%d]", got, err, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if left := WaitGone(ctx, []int{pid}); left != nil {
		t.Fatal("killed sleeper still alive")
	}
	// Not reaped yet: a zombie, left out of ProcessesInGroup.
	live, zombies, err := GroupMembers(pid)
	if err != nil || live != nil || !slices.Equal(zombies, []int{pid}) {
		t.Errorf("GroupMembers before Wait = %v, %v, %v; want no live, zombie %d", live, zombies, err, pid)
	}
	_ = cmd.Wait()
	reaped = true
	live, zombies, err = GroupMembers(pid)
	if err != nil || live != nil || zombies != nil {
		t.Errorf("GroupMembers after Wait = %v, %v, %v; want nothing", live, zombies, err)
	}
}

func TestWaitGoneReturnsSurvivors(t *testing.T) {
	t.Parallel()
	// The stopwatch starts before the deadline's clock does, so a WaitGone
	// that waits for the deadline cannot be timed below it.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if left := WaitGone(ctx, []int{os.Getpid(), 1 << 30}); !slices.Equal(left, []int{os.Getpid()}) {
		t.Errorf("WaitGone = %v, want [self]", left)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("WaitGone returned after %v", d)
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line  string
		state byte
		pgrp  int
		ok    bool
	}{
		{"42 (mcpserver) S 1 42 42 0 -1 4194560", 'S', 42, true},
		{"43 (a) b (c)) Z 42 41 41 0", 'Z', 41, true},
		{"44 (x y) R 1", 0, 0, false},
		{"45 no parens S 1 2", 0, 0, false},
		{"46 (x) S 1 notanumber", 0, 0, false},
	} {
		state, pgrp, err := parseStat([]byte(c.line))
		if (err == nil) != c.ok || state != c.state || pgrp != c.pgrp {
			t.Errorf("parseStat(%q) = %q, %d, %v", c.line, state, pgrp, err)
		}
	}
	state, pgrp, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if want := syscall.Getpgrp(); pgrp != want || dead(state) {
		t.Errorf("procStat(self) = %q, %d; want live, pgrp %d", state, pgrp, want)
	}
}
