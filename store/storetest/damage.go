package storetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

// FlipRecordByte damages the journal file at path (which must not be
// open) by flipping one bit in the middle of the record stored for
// (session, seq). It finds the record's global position by reading the
// session through the journal, then the record in the log bucket through
// bbolt, then flips the bit in every copy of the record's bytes in the
// file, so that stale copies in freed pages cannot hide the damage. It
// fails t if the record is not found.
func FlipRecordByte(t testing.TB, path string, session uuid.UUID, seq uint64) {
	t.Helper()
	j, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	var gpos uint64
	errFound := errors.New("found")
	err = j.ReadSession(t.Context(), session, seq, func(e events.Event) error {
		gpos = e.GPos
		return errFound
	})
	if cerr := j.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	if !errors.Is(err, errFound) {
		t.Fatalf("find record %s/%d in %s: %v", session, seq, path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open %s with bbolt: %v", path, err)
	}
	var rec []byte
	err = db.View(func(tx *bolt.Tx) error {
		log := tx.Bucket([]byte("log"))
		if log == nil {
			return os.ErrNotExist
		}
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], gpos)
		rec = bytes.Clone(log.Get(k[:]))
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil || rec == nil {
		t.Fatalf("find record %s/%d (gpos %d) in %s: %v", session, seq, gpos, path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for off := 0; ; {
		i := bytes.Index(data[off:], rec)
		if i < 0 {
			break
		}
		data[off+i+len(rec)/2] ^= 0x10
		off += i + len(rec)
		n++
	}
	if n == 0 {
		t.Fatalf("record %s/%d not found in the bytes of %s", session, seq, path)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
