package events

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestInternerBounds: the intern table hands out one copy of each string
// of up to maxInternLen bytes, and holds at most maxInterned of them;
// strings beyond either bound are still returned, as fresh copies.
func TestInternerBounds(t *testing.T) {
	var in interner
	// interned reports whether two reads of s share one copy.
	interned := func(s string) bool {
		a, b := in.get([]byte(s)), in.get([]byte(s))
		if a != s || b != s {
			t.Fatalf("get(%q) = %q, %q", s, a, b)
		}
		return unsafe.StringData(a) == unsafe.StringData(b)
	}
	if got := in.get(nil); got != "" {
		t.Errorf("get(nil) = %q", got)
	}
	if s := strings.Repeat("x", maxInternLen); !interned(s) {
		t.Errorf("a string of maxInternLen bytes is not interned")
	}
	if s := strings.Repeat("x", maxInternLen+1); interned(s) {
		t.Errorf("a string of maxInternLen+1 bytes is interned")
	}
	for i := 1; i < maxInterned; i++ { // one string is in the table
		if s := strconv.Itoa(i); !interned(s) {
			t.Fatalf("string %d of %d is not interned", i+1, maxInterned)
		}
	}
	if interned("one too many") {
		t.Errorf("the table holds more than maxInterned strings")
	}
	if !interned("7") {
		t.Errorf("a full table lost a string it held")
	}
}

// TestRecReader: the reader a Decoder hands msgpack keeps the io.Reader
// and io.ByteScanner contracts msgpack relies on at both ends of a record.
func TestRecReader(t *testing.T) {
	var r recReader
	r.reset([]byte("ab"))
	if err := r.UnreadByte(); err == nil {
		t.Error("UnreadByte before any read succeeded")
	}
	if c, err := r.ReadByte(); c != 'a' || err != nil {
		t.Errorf("ReadByte = %q, %v", c, err)
	}
	if err := r.UnreadByte(); err != nil {
		t.Errorf("UnreadByte after a read: %v", err)
	}
	p := make([]byte, 4)
	if n, err := r.Read(p); n != 2 || err != nil || string(p[:n]) != "ab" {
		t.Errorf("Read = %d %q, %v; want the unread byte and the rest", n, p[:n], err)
	}
	if n, err := r.Read(p); n != 0 || err != io.EOF {
		t.Errorf("Read at the end = %d, %v; want 0, EOF", n, err)
	}
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Errorf("empty Read at the end = %d, %v; want 0, nil", n, err)
	}
	if c, err := r.ReadByte(); err != io.EOF {
		t.Errorf("ReadByte at the end = %q, %v; want EOF", c, err)
	}
	if err := r.UnreadByte(); err != nil {
		t.Errorf("UnreadByte at the end: %v", err)
	}
	if c, err := r.ReadByte(); c != 'b' || err != nil {
		t.Errorf("ReadByte after UnreadByte = %q, %v; want 'b'", c, err)
	}
}
