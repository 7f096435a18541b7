package main

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// Read commands yield the CPU to the process that writes the journal: a
// reader must never slow the agent's runtime down, and on a small machine
// ten followers decoding every event would. Lowering is per thread on
// Linux (setpriority with PRIO_PROCESS takes a thread ID), so every
// thread the process has is lowered; threads started later inherit the
// value from the thread that starts them.
const (
	// followerNice is the priority of `log --follow`: it runs for hours
	// beside the writer and may lag a moment behind it under load.
	followerNice = 19
	// readerNice is the priority of a read command that finds a writer
	// holding the journal.
	readerNice = 10
)

// schedIdle is Linux's SCHED_IDLE policy: a thread that runs only when no
// other wants the CPU, and that a waking normal thread preempts at once.
const schedIdle = 5

// lowerPriority sets this process's threads to nice n unless they are
// lower already; for followerNice, to SCHED_IDLE as well: a writer's
// group commit is a chain of wake-ups, each of which must not wait for a
// follower's time slice to end. Failures are ignored: the priority is a
// courtesy.
func lowerPriority(n int) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// getpriority returns 20-nice (the kernel's biased value).
		if cur, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid); err == nil && 20-cur >= n {
			continue
		}
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, n)
		if n == followerNice {
			var param [1]int32 // struct sched_param{sched_priority: 0}
			_, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, uintptr(tid), schedIdle, uintptr(unsafe.Pointer(&param[0])))
		}
	}
}
