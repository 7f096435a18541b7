package store

import (
	"bufio"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
)

// TestServeFollowStaysOpen: a follow answer sends what is stored, an end
// frame, and then, on the same stream, each later commit followed by an
// end frame, until its context ends; a log answer ends after its end
// frame.
func TestServeFollowStaysOpen(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	sid := events.NewID()
	appendN := func(n int) {
		t.Helper()
		evs := make([]events.Event, n)
		for i := range evs {
			evs[i] = events.New(time.Unix(1, 0), "s", &events.StopRequested{By: "t"})
		}
		if _, err := j.Append(t.Context(), sid, Any, evs); err != nil {
			t.Fatal(err)
		}
	}
	appendN(3)
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- ServeRead(ctx, j, []byte(`{"op":"follow","from":2}`), pw); pw.Close() }()
	fr := &frameReader{r: bufio.NewReader(pr)}
	expect := func(kind byte, pos uint64) {
		t.Helper()
		if err := fr.read(); err != nil {
			t.Fatalf("read frame: %v", err)
		}
		got := fr.pos.gpos
		if kind == 'E' {
			got = fr.next
		}
		if fr.kind != kind || got != pos {
			t.Fatalf("frame %q at %d, want %q at %d", fr.kind, got, kind, pos)
		}
	}
	expect('R', 2)
	expect('R', 3)
	expect('E', 4)
	appendN(2)
	expect('R', 4)
	expect('R', 5)
	expect('E', 6)
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("ServeRead after cancel: %v", err)
	}

	var buf pipeBuffer
	if err := ServeRead(t.Context(), j, []byte(`{"op":"log","from":4}`), &buf); err != nil {
		t.Fatal(err)
	}
	fr = &frameReader{r: bufio.NewReader(&buf)}
	expect('R', 4)
	expect('R', 5)
	expect('E', 6)
	if err := fr.read(); !errors.Is(err, io.EOF) {
		t.Errorf("after a log answer's end: %v, want EOF", err)
	}
}

// TestServeReadWriteError: ServeRead returns the error of a writer that
// fails (a reader that hung up), and refuses a malformed request.
func TestServeReadWriteError(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "j.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	gone := errors.New("hung up")
	if err := ServeRead(t.Context(), j, []byte(`{"op":"info"}`), failingWriter{gone}); !errors.Is(err, gone) {
		t.Errorf("ServeRead to a failing writer: %v, want its error", err)
	}
	if err := ServeRead(t.Context(), j, []byte(`{`), io.Discard); err == nil {
		t.Error("ServeRead of a malformed request succeeded")
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

// pipeBuffer is a bytes buffer (io.Reader and io.Writer).
type pipeBuffer struct{ b []byte }

func (p *pipeBuffer) Write(b []byte) (int, error) { p.b = append(p.b, b...); return len(b), nil }
func (p *pipeBuffer) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.b)
	p.b = p.b[n:]
	return n, nil
}
