package store

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
)

// TestOpenWarnsOfBadRecords: a writable Open reads the end of the log to
// rebuild the retry window; records there that fail their CRC do not
// stop it, but it logs a warning with their number. An intact journal
// opens without one.
func TestOpenWarnsOfBadRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	open := func() string {
		t.Helper()
		var buf bytes.Buffer
		j, err := Open(path, &Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(t.Context(), events.NewID(), NoStream, []events.Event{ev("a", 1), ev("a", 2)}); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	if log := open(); strings.Contains(log, "level=WARN") {
		t.Errorf("Open of an intact journal warned:\n%s", log)
	}
	damage(t, path, func(tx *bolt.Tx) error { // flip a bit in records 1 and 2
		logB := tx.Bucket(bucketLog)
		var k [8]byte
		for _, gpos := range []uint64{1, 2} {
			rec := bytes.Clone(logB.Get(itob(&k, gpos)))
			rec[len(rec)/2] ^= 0x10
			if err := logB.Put(itob(&k, gpos), rec); err != nil {
				return err
			}
		}
		return nil
	})
	want := `level=WARN msg="records at the end of the journal fail their CRC; run verify" path=` + path + " records=2\n"
	if log := open(); !strings.Contains(log, want) {
		t.Errorf("Open of a journal with two damaged records logged:\n%s\nwant a line ending %q", log, want)
	}
}
