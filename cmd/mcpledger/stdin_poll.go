package main

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// pollable returns in for reading through Go's network poller when it is
// a pipe or a socket in blocking mode (as a client's pipe on stdin is),
// and a func that gives the descriptor back its blocking mode; any other
// reader is returned as it is, with a func that does nothing.
//
// Why: a goroutine blocked in read(2) on such a descriptor holds its
// thread in a system call, and the Go runtime (1.26.8, 1.27.3) can then
// fail to stop the world for a garbage collection: a goroutine that has
// checked for a pending stop but not yet marked itself as in a system
// call when stopTheWorldWithSema makes its one pass over the Ps in system
// calls is never taken after it (preemptall skips goroutines in system
// calls, and sysmon sleeps while the world is stopping), so the process
// freezes until the read returns, that is, until the client writes again.
// A client that waits for an answer never does. RELIABILITY.md ("A Go
// runtime hang") has the cause in the runtime's code and the stacks.
// A read through the poller parks the goroutine instead, out of any
// system call.
//
// The flag is on the open file description, which the client's end of a
// pipe does not share; a terminal or a file, which other processes may
// share, is left alone.
func pollable(in io.Reader) (io.Reader, func()) {
	nothing := func() {}
	f, ok := in.(*os.File)
	if !ok {
		return in, nothing
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return in, nothing
	}
	var dup int
	var derr error
	if err := sc.Control(func(fd uintptr) {
		var st syscall.Stat_t
		if derr = syscall.Fstat(int(fd), &st); derr != nil {
			return
		}
		if kind := st.Mode & syscall.S_IFMT; kind != syscall.S_IFIFO && kind != syscall.S_IFSOCK {
			derr = syscall.ENOTSUP
			return
		}
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil || flags&unix.O_NONBLOCK != 0 { // already read through the poller, or unknown
			derr = syscall.ENOTSUP
			return
		}
		dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil || derr != nil {
		return in, nothing
	}
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		return in, nothing
	}
	pf := os.NewFile(uintptr(dup), f.Name()) // non-blocking: read through the poller
	return pf, func() {
		// Close the duplicate (a read parked on it ends), then give the
		// description, shared with in's descriptor, its blocking mode back.
		_ = pf.Close()
		_ = sc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}
}
