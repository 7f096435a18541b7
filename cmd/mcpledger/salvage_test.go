package main

// Damaged journals through the CLI (issue 19): read commands on a
// damaged journal name `mcpledger salvage`; salvage copies what still
// reads into a new journal that verifies; export of a damaged session
// prints its events up to the damage; run refuses a journal whose
// structure is damaged without writing a byte.

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// salvageFixture is a journal of 24 sessions recorded from real runs
// (testdata/journals, each replayed under a new session id), one after
// the other: it replays, so verify passes on it whole. It returns the
// path and the sessions in log order.
func salvageFixture(t *testing.T) (string, []uuid.UUID) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	j := mustCreate(t, path)
	var sids []uuid.UUID
	for i := range 24 {
		name := []string{"crash-loop.jsonl", "approvals.jsonl", "reload.jsonl"}[i%3]
		fh, err := os.Open(filepath.Join("..", "..", "testdata", "journals", name))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := replay.ReadJSONL(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		sid := events.NewID()
		for k := range evs {
			evs[k].ID, evs[k].Session = uuid.Nil, sid
		}
		appendAll(t, j, sid, evs...)
		sids = append(sids, sid)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path, sids
}

// usedBytes is the size of the pages in use of the journal at path.
func usedBytes(t *testing.T, path string) int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var size int64
	_ = db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	return size
}

// damagedCopy writes a copy of the journal at path, changed by damage.
func damagedCopy(t *testing.T, path string, damage func(b []byte) []byte) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(bad, damage(b), 0o600); err != nil {
		t.Fatal(err)
	}
	return bad
}

// TestSalvageTruncatedCLI: the probe's journal cut to half its size. Every
// read command fails naming salvage; salvage copies the sessions before
// the cut whole, and verify (records and replay) passes on the result.
func TestSalvageTruncatedCLI(t *testing.T) {
	path, sids := salvageFixture(t)
	used := usedBytes(t, path)
	bad := damagedCopy(t, path, func(b []byte) []byte { return b[:used/2] })
	hint := "mcpledger salvage " + bad + " -o " + bad + ".salvaged"
	for _, args := range [][]string{{"sessions"}, {"log"}, {"status"}, {"approvals"}, {"export", sids[0].String()}, {"replay", sids[0].String()}, {"verify"}, {"timeline", sids[0].String(), "-o", "-"}} {
		r := runCLI(t, append(args, "--journal", bad)...)
		if r.err == nil || !errors.Is(r.err, store.ErrCorrupt) || !strings.Contains(r.err.Error(), hint) {
			t.Errorf("%s on the truncated journal: %v\nwant an ErrCorrupt that names %q", args[0], r.err, hint)
		}
	}

	out := filepath.Join(t.TempDir(), "salvaged.db")
	r := runCLI(t, "salvage", bad, "-o", out)
	if r.err != nil {
		t.Fatalf("salvage: %v", r.err)
	}
	if !strings.HasPrefix(r.stdout, "salvaged "+bad+" into "+out+": ") || !strings.Contains(r.stdout, "lost") ||
		!strings.Contains(r.stdout, "next: check it with `mcpledger verify --journal "+out+"`") {
		t.Errorf("salvage printed:\n%s", r.stdout)
	}
	t.Logf("salvage of a journal cut to half:\n%s", r.stdout)
	if r := runCLI(t, "verify", "--journal", out); r.err != nil || !strings.HasPrefix(r.stdout, "OK ") {
		t.Fatalf("verify of the salvaged journal: %v %s", r.err, r.stdout)
	}
	// The first session is whole, and exports as it did.
	want := runCLI(t, "export", sids[0].String(), "--journal", path)
	got := runCLI(t, "export", sids[0].String(), "--journal", out)
	if want.err != nil || got.err != nil || got.stdout != want.stdout || got.stdout == "" {
		t.Errorf("the first session exports differently after salvage (%v, %v)", want.err, got.err)
	}

	r = runCLI(t, "salvage", bad, "-o", out, "--json")
	if r.err == nil || !errors.Is(r.err, store.ErrTargetExists) {
		t.Errorf("salvage onto an existing file: %v", r.err)
	}
	if r := runCLI(t, "verify", "--journal", out); r.err != nil {
		t.Errorf("the refused salvage changed its target: %v", r.err)
	}
}

// TestSalvageRandomMiddleCLI: 4 KiB of random bytes in the middle: salvage
// copies each session up to the damage (--json), and the result verifies.
func TestSalvageRandomMiddleCLI(t *testing.T) {
	path, sids := salvageFixture(t)
	used := usedBytes(t, path)
	bad := damagedCopy(t, path, func(b []byte) []byte { _, _ = rand.Read(b[used/2 : used/2+4096]); return b })
	if r := runCLI(t, "verify", "--journal", bad); r.err == nil || !strings.Contains(r.err.Error(), "mcpledger salvage "+bad) {
		t.Errorf("verify of the damaged journal: %v", r.err)
	}
	out := filepath.Join(t.TempDir(), "salvaged.db")
	r := runCLI(t, "salvage", bad, "-o", out, "--json")
	if r.err != nil {
		t.Fatalf("salvage: %v", r.err)
	}
	var rep salvageJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("salvage --json: %v\n%s", err, r.stdout)
	}
	if rep.Source != bad || rep.Target != out || len(rep.PerSession) != len(sids) || rep.Lost == 0 || rep.Events == 0 {
		t.Errorf("salvage --json: %+v", rep)
	}
	for _, s := range rep.PerSession {
		if s.FirstLost != 0 && (s.FirstLost != s.Kept+1 || s.Reason == "") {
			t.Errorf("session %+v", s)
		}
	}
	if r := runCLI(t, "verify", "--journal", out); r.err != nil {
		t.Fatalf("verify of the salvaged journal: %v", r.err)
	}
}

// TestExportDamagedSession: export of a session with a bad record prints
// its events up to it, then fails naming the damage and salvage.
func TestExportDamagedSession(t *testing.T) {
	path, sids := salvageFixture(t)
	bad := damagedCopy(t, path, func(b []byte) []byte { return b })
	storetest.FlipRecordByte(t, bad, sids[1], 20)
	r := runCLI(t, "export", sids[1].String(), "--journal", bad)
	var ce *store.CorruptError
	if !errors.As(r.err, &ce) || ce.Seq != 20 || exitCode(r.err) != 1 || !strings.Contains(r.err.Error(), "mcpledger salvage "+bad) {
		t.Errorf("export of a damaged session: %v", r.err)
	}
	evs, err := replay.ReadJSONL(strings.NewReader(r.stdout))
	if err != nil || len(evs) != 19 || evs[18].Seq != 19 {
		t.Errorf("export of a session damaged at seq 20 printed %d events (%v), want 1-19", len(evs), err)
	}
}

// TestRunRefusesDamagedBranch: the probe's journal with a damaged branch
// page of the log, which verify reports: run --once refuses it, naming
// the page and salvage, and the file keeps every byte.
func TestRunRefusesDamagedBranch(t *testing.T) {
	path, _ := salvageFixture(t)
	var root uint64
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("log")).Root())
		return nil
	})
	db.Close()
	bad := damagedCopy(t, path, func(b []byte) []byte {
		le, be := binary.LittleEndian, binary.BigEndian
		p := b[root*4096:]
		if le.Uint16(p[8:]) != 0x01 || le.Uint16(p[10:]) < 3 {
			t.Fatalf("the log's root page %d is not a branch of 3 or more children", root)
		}
		key := func(i int) []byte { // branch element i: pos, ksize, child
			at := 16 + 16*i
			pos := at + int(le.Uint32(p[at:]))
			return p[pos : pos+8]
		}
		be.PutUint64(key(1), be.Uint64(key(2))+1) // out of order, inside the log
		return b
	})
	if r := runCLI(t, "verify", "--journal", bad); r.err == nil || !strings.Contains(r.err.Error(), "damaged branch page") {
		t.Fatalf("verify of the damaged journal: %v, want a damaged branch page", r.err)
	}
	before, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := faultConfig(t, dir, false)
	for range 3 {
		r := runCLI(t, "run", "--once", "--journal", bad, "--mcp-config", cfg, "--workspace", dir)
		if !errors.Is(r.err, store.ErrDamaged) || !strings.Contains(r.err.Error(), "mcpledger salvage "+bad+" -o "+bad+".salvaged") ||
			strings.Count(r.err.Error(), "mcpledger salvage") != 1 {
			t.Errorf("run --once on a journal with a damaged branch page: %v, want ErrDamaged naming salvage once", r.err)
		}
		if after, _ := os.ReadFile(bad); !bytes.Equal(after, before) {
			t.Fatal("run --once changed the damaged journal")
		}
	}
	out := filepath.Join(t.TempDir(), "salvaged.db")
	if r := runCLI(t, "salvage", bad, "-o", out); r.err != nil || !strings.Contains(r.stdout, "nothing was lost") {
		t.Errorf("salvage of a journal whose records all read: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, "run", "--once", "--journal", out, "--mcp-config", cfg, "--workspace", dir); errors.Is(r.err, store.ErrCorrupt) {
		t.Errorf("run --once on the salvaged journal: %v", r.err)
	}
}

// TestSalvageUsage: salvage without a file or without -o is a usage
// error (exit 2); -h prints its flags.
func TestSalvageUsage(t *testing.T) {
	for _, args := range [][]string{{"salvage"}, {"salvage", "--json"}, {"salvage", "j.db"}, {"salvage", "j.db", "extra", "-o", "x"}} {
		if r := runCLI(t, args...); exitCode(r.err) != 2 {
			t.Errorf("%v: %v (exit %d), want a usage error", args, r.err, exitCode(r.err))
		}
	}
	r := runCLI(t, "salvage", "-h")
	if r.err != nil || !strings.Contains(r.stdout, "usage: mcpledger salvage DAMAGED -o NEW [--json]") {
		t.Errorf("salvage -h: %v\n%s", r.err, r.stdout)
	}
	if r := runCLI(t, "salvage", filepath.Join(t.TempDir(), "none.db"), "-o", filepath.Join(t.TempDir(), "n.db")); r.err == nil || exitCode(r.err) != 1 {
		t.Errorf("salvage of a missing file: %v", r.err)
	}
}
