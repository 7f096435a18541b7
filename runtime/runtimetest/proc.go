package runtimetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// procStat reads the state letter and process group of pid from
// /proc/PID/stat.
func procStat(pid int) (state byte, pgrp int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	state, pgrp, err = parseStat(b)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
	}
	return state, pgrp, nil
}

// parseStat picks the state letter and pgrp out of a /proc/PID/stat line:
// "pid (comm) state ppid pgrp ...". comm may hold spaces and parentheses,
// so the fields start after the last ')'.
func parseStat(b []byte) (state byte, pgrp int, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed: no ')'")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, errors.New("malformed: too few fields")
	}
	pgrp, err = strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, fmt.Errorf("malformed pgrp: %v", err)
	}
	return f[0][0], pgrp, nil
}

// dead reports whether a /proc state letter is a zombie or a dead task.
func dead(state byte) bool { return state == 'Z' || state == 'X' || state == 'x' }

// GroupMembers lists the processes whose process group id is pgid, from
// /proc/*/stat (field 5, pgrp), in ascending pid order: live ones and
// zombies apart.
//
// A zombie has exited but has not been reaped by its parent. It holds no
// resources but its pid and cannot be killed, so ProcessesInGroup leaves it
// out; it is still a leak, of the reaper rather than of the process. A
// zombie whose parent is the test process means a missing cmd.Wait. A
// zombie re-parented to a PID 1 that does not reap (as in some
// containers) is the environment's, and tests should not fail on it.
func GroupMembers(pgid int) (live, zombies []int, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgrp, err := procStat(pid)
		if err != nil {
			continue // exited and reaped while we looked
		}
		if pgrp != pgid {
			continue
		}
		if dead(state) {
			zombies = append(zombies, pid)
		} else {
			live = append(live, pid)
		}
	}
	slices.Sort(live)
	slices.Sort(zombies)
	return live, zombies, nil
}

// ProcessesInGroup lists the live (not zombie) processes whose process
// group id is pgid, in ascending pid order. See GroupMembers for zombies.
func ProcessesInGroup(pgid int) ([]int, error) {
	live, _, err := GroupMembers(pgid)
	return live, err
}

// Alive reports whether process pid exists and is not a zombie. Where
// /proc is missing it falls back to kill(pid, 0), which counts zombies as
// alive.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	state, _, err := procStat(pid)
	if err == nil {
		return !dead(state)
	}
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat("/proc/self/stat"); serr == nil {
			return false // /proc works: pid is gone
		}
		return syscall.Kill(pid, 0) == nil
	}
	return false
}

// DefaultWaitGone bounds WaitGone when its ctx has no deadline.
const DefaultWaitGone = 10 * time.Second

// WaitGone polls every 10 ms until none of pids is Alive, and returns the
// ones still alive when ctx ends (nil if all are gone). If ctx has no
// deadline, WaitGone gives up after DefaultWaitGone.
func WaitGone(ctx context.Context, pids []int) []int {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWaitGone)
		defer cancel()
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		var alive []int
		for _, p := range pids {
			if Alive(p) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return alive
		case <-t.C:
		}
	}
}
