package store

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// faultSink keeps TestReadFaultIsCorrupt's load from being optimized away.
var faultSink byte

// A read transaction that touches the map past the end of the file
// (SIGBUS) returns a *CorruptError, and the journal stays usable.
func TestReadFaultIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	sid := uuid.New()
	if _, err := j.Append(ctx, sid, NoStream, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty append: %v", err)
	}
	if _, err := j.Append(ctx, sid, NoStream, []events.Event{ev("a", 1)}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	err = j.view(ctx, func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketMeta).Cursor().First()
		base := unsafe.Pointer(unsafe.SliceData(k))
		off := int(fi.Size()) + os.Getpagesize() - int(uintptr(base)-tx.DB().Info().Data)
		faultSink = *(*byte)(unsafe.Add(base, off)) // past the end of the file, inside the map
		t.Error("reading past the end of the file did not fault")
		return nil
	})
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "memory fault") {
		t.Fatalf("view = %v (%T), want a *CorruptError for a memory fault", err, err)
	}
	if _, err := j.Verify(ctx); err != nil {
		t.Fatalf("Verify after the fault: %v", err)
	}
	if _, err := j.Append(ctx, sid, Exact(1), []events.Event{ev("a", 2)}); err != nil {
		t.Fatalf("Append after the fault: %v", err)
	}
}

// A panic in a write transaction, in fn or in the commit, rolls it back
// and returns a *CorruptError; the journal stays usable.
func TestUpdatePanicIsCorrupt(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "journal.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.txMu.Lock()
	err = j.update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put([]byte("x"), []byte("y")); err != nil {
			return err
		}
		panic("damaged page")
	})
	j.txMu.Unlock()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("update = %v, want ErrCorrupt", err)
	}
	ctx := context.Background()
	if _, err := j.Append(ctx, uuid.New(), NoStream, []events.Event{ev("a", 1)}); err != nil {
		t.Fatalf("Append after the panic: %v", err)
	}
	if err := j.read(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get([]byte("x")); v != nil {
			t.Errorf("the panicking transaction's put is stored: %q", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// panicLogger makes bolt.Open panic after it has opened, locked and
// mapped the file: when it logs its success.
type panicLogger struct{ bolt.DefaultLogger }

func (l *panicLogger) Infof(format string, v ...any) {
	if strings.Contains(format, "successfully") {
		panic("bbolt panicked inside Open")
	}
}

// When bbolt panics inside bolt.Open, boltOpen returns a *CorruptError
// and has released the file and its lock.
func TestBoltOpenPanicReleasesLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	lg := &panicLogger{bolt.DefaultLogger{Logger: log.New(io.Discard, "", 0)}}
	db, err := boltOpen(path, &bolt.Options{Timeout: 100 * time.Millisecond, Logger: lg})
	var ce *CorruptError
	if db != nil || !errors.As(err, &ce) {
		t.Fatalf("boltOpen = %v, %v, want a *CorruptError", db, err)
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("the file is still locked: %v", err)
	}
	db.Close()
}

// checkFile refuses a damaged freelist, which a writable bolt.Open would
// panic or fault on while holding the file's lock, and a damaged root
// bucket page, whose inline buckets bbolt copies by their stored length.
func TestCheckFilePages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(path, &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 20 { // commits leave free pages behind
		if _, err := j.Append(ctx, uuid.New(), NoStream, []events.Event{ev("a", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFile(path, time.Second); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	m0, _ := parseMeta(good)
	m1, _ := parseMeta(good[m0.pageSize:])
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	// bbolt grew the file by 16 MiB; past its pages in use it is zeros
	// that checkFile ignores. Damaged copies of the rest are quick to write.
	good = good[:m.pgid*uint64(m.pageSize)]
	le := binary.LittleEndian
	fl := int(m.freelist) * int(m.pageSize)
	count := int(le.Uint16(good[fl+10:]))
	if count < 2 {
		t.Fatalf("the freelist lists %d pages; the test needs 2", count)
	}
	id := func(i int) int { return fl + pageHeader + 8*i }
	root := int(m.root) * int(m.pageSize)
	for name, damage := range map[string]func(b []byte){
		"root flags":        func(b []byte) { b[root+8] = 0x10 },
		"root element size": func(b []byte) { le.PutUint32(b[root+pageHeader+12:], 1<<30) },
		"page id":           func(b []byte) { b[fl] ^= 1 },
		"flags":             func(b []byte) { b[fl+8] = 0x02 },
		"count":             func(b []byte) { le.PutUint16(b[fl+10:], 600) },
		"overflow":          func(b []byte) { le.PutUint32(b[fl+12:], 1<<20) },
		"big count":         func(b []byte) { le.PutUint16(b[fl+10:], freelistCountMax); le.PutUint64(b[id(0):], 1<<40) },
		"meta page":         func(b []byte) { le.PutUint64(b[id(0):], 1) },
		"past the end":      func(b []byte) { le.PutUint64(b[id(1):], m.pgid) },
		"twice":             func(b []byte) { copy(b[id(1):id(2)], b[id(0):id(1)]) },
		"root page":         func(b []byte) { le.PutUint64(b[id(0):], m.root) },
		"freelist itself":   func(b []byte) { le.PutUint64(b[id(0):], m.freelist) },
	} {
		b := append([]byte(nil), good...)
		damage(b)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		err := checkFile(path, time.Second)
		if want := map[bool]string{true: "root bucket", false: "freelist"}[strings.HasPrefix(name, "root")]; !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: checkFile = %v, want ErrCorrupt naming the %s", name, err, want)
		}
		if j, err := Open(path, nil); err == nil {
			j.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

// mapped.holds and mapped.text on a region of a buffer standing in for
// the map: 4 KiB of pages in use in an 8 KiB map, and 64 bytes after it.
func TestMappedBounds(t *testing.T) {
	buf := make([]byte, 8192+64)
	lo := uintptr(unsafe.Pointer(&buf[0]))
	m := mapped{lo: lo, hi: lo + 4096, end: lo + 8192}
	heap := make([]byte, 5000)
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"empty", nil, true},
		{"inside", buf[10:20], true},
		{"to the end", buf[4000:4096], true},
		{"across the end", buf[4090:4100], false},
		{"past the end", buf[5000:5010], false},
		{"last byte of the map", buf[8191:8192], false},
		{"just past the map", buf[8192:8200], true}, // not the map's: a copy
		{"elsewhere, short", heap[:100], true},
		{"elsewhere, as long as the file", heap[:4096], true},
		{"elsewhere, longer than the file", heap, false},
	} {
		if got := m.holds(c.b); got != c.want {
			t.Errorf("%s: holds = %v, want %v", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		k    []byte
		want string
	}{
		{nil, "none"},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 9}, "0000000000000009"},
		{buf[5000:5008], "(8 bytes outside the file: damaged page)"},
		{buf[:100], strings.Repeat("00", keyTextMax) + "… (100 bytes)"},
	} {
		if got := m.text(c.k); got != c.want {
			t.Errorf("text(%d bytes) = %q, want %q", len(c.k), got, c.want)
		}
	}
}

// ascending accepts a walk's keys only while each sorts strictly after
// the one before.
func TestAscending(t *testing.T) {
	var prev []byte
	for i, c := range []struct {
		k    string
		want bool
	}{{"b", true}, {"c", true}, {"c", false}, {"d", true}, {"a", false}, {"b", true}} {
		if got := ascending(&prev, []byte(c.k)); got != c.want {
			t.Errorf("key %d (%q): ascending = %v, want %v", i, c.k, got, c.want)
		}
	}
}

// mappedOf bounds a read transaction's view of the map at the pages in
// use: a key inside them is held, bytes of the map just past them are not.
func TestMappedOf(t *testing.T) {
	j, err := Open(filepath.Join(t.TempDir(), "journal.db"), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.Append(t.Context(), uuid.New(), NoStream, []events.Event{ev("a", 1)}); err != nil {
		t.Fatal(err)
	}
	err = j.view(t.Context(), func(tx *bolt.Tx) error {
		m := mappedOf(tx)
		k, _ := tx.Bucket(bucketMeta).Cursor().First()
		if !m.holds(k) {
			t.Errorf("a key of the transaction is not held")
		}
		base := unsafe.Pointer(unsafe.SliceData(k))
		past := unsafe.Slice((*byte)(unsafe.Add(base, int(tx.Size())-int(uintptr(base)-tx.DB().Info().Data))), 8)
		if m.holds(past) {
			t.Errorf("8 bytes of the map past the transaction's %d bytes are held", tx.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
