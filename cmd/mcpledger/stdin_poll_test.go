package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// blockingPipe returns the ends of a pipe in blocking mode, as a client's
// pipe arrives on stdin (os.Pipe's are non-blocking).
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// readState starts read(in) on a goroutine of its own (the frame
// pollReadFrame names it) and returns the state the runtime shows for
// that goroutine once it is blocked, and a channel with what it read.
func readState(t *testing.T, in io.Reader) (string, <-chan string) {
	t.Helper()
	got := make(chan string, 1)
	go pollReadFrame(in, got) // ends when the test writes to the pipe or closes it
	re := regexp.MustCompile(`goroutine \d+ \[([^\]]+)\]:\n(?:.*\n)*?.*\.pollReadFrame`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range bytes.Split(buf, []byte("\n\n")) {
			if m := re.FindSubmatch(append(g, '\n')); m != nil && string(m[1]) != "runnable" && string(m[1]) != "running" {
				return string(m[1]), got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader never blocked:\n%s", buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pollReadFrame(in io.Reader, got chan<- string) {
	b := make([]byte, 64)
	n, _ := in.Read(b)
	got <- string(b[:n])
}

// TestPollable checks that serve --stdio reads a client's pipe through
// the poller: the reading goroutine waits parked ("IO wait"), never in
// read(2) ("syscall"), where the Go runtime may fail to stop the world
// for a collection until the client writes again (see pollable). The
// pipe's blocking mode is given back after; other inputs are left alone.
func TestPollable(t *testing.T) {
	// What the runtime shows for a read of the pipe as it comes: the
	// state the fix must avoid.
	raw, rawW := blockingPipe(t)
	if state, got := readState(t, raw); state != "syscall" {
		t.Fatalf("a read of a blocking pipe shows %q, want syscall: this test cannot tell the fix from its absence", state)
	} else {
		rawW.Write([]byte("x"))
		<-got
	}

	r, w := blockingPipe(t)
	in, restore := pollable(r)
	if in == io.Reader(r) {
		t.Fatal("a blocking pipe was returned as it is")
	}
	state, got := readState(t, in)
	if state != "IO wait" {
		t.Errorf("the client's pipe is read in state %q, want IO wait (parked in the poller, out of any system call)", state)
	}
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "hello\n" {
			t.Errorf("read %q, want %q", s, "hello\n")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not return what was written")
	}
	flags, err := unix.FcntlInt(r.Fd(), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Fatalf("while served, the pipe's flags %#x (err %v) lack O_NONBLOCK", flags, err)
	}
	restore()
	if flags, err := unix.FcntlInt(r.Fd(), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK != 0 {
		t.Errorf("after restore the pipe's flags are %#x (err %v): still non-blocking", flags, err)
	}
	if _, err := in.Read(make([]byte, 1)); err == nil {
		t.Error("the duplicate still reads after restore: not closed")
	}

	// Left alone: a file, a reader that is no file, a pipe already read
	// through the poller.
	f, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	for name, x := range map[string]io.Reader{"file": f, "bytes": bytes.NewReader(nil), "os.Pipe": pr} {
		got, restore := pollable(x)
		restore()
		if got != x {
			t.Errorf("%s: replaced, want it as it is", name)
		}
	}
}

// TestServeStdioPipe: serve --stdio on a client's pipe as it arrives
// (blocking) reads it through the poller while it serves, answers a call,
// and gives the pipe its blocking mode back when the client goes.
func TestServeStdioPipe(t *testing.T) {
	f := newServeFixture(t)
	serveR, clientW := blockingPipe(t)
	clientR, serveW := io.Pipe()
	done, errb := runServeStdio(f.cfg, f.dir, serveR, serveW)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pipe-client", Version: "1"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: clientR, Writer: clientW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "mcp__good__echo", Arguments: map[string]any{"message": "via a pipe"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "via a pipe" {
		t.Fatalf("call: %v %+v", err, res)
	}
	if flags, err := unix.FcntlInt(serveR.Fd(), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Errorf("while serving, the pipe's flags are %#x (err %v): read in blocking mode", flags, err)
	}
	cs.Close() // closes clientW: serve reads EOF and returns
	waitServeEnd(t, done, errb)
	if flags, err := unix.FcntlInt(serveR.Fd(), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK != 0 {
		t.Errorf("after serve, the pipe's flags are %#x (err %v): its blocking mode not given back", flags, err)
	}
}
