package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/store"
)

func checkpoints(t *testing.T, j *store.Journal) []store.Checkpoint {
	t.Helper()
	cps, err := j.Checkpoints(t.Context())
	if err != nil {
		t.Fatalf("Checkpoints: %v", err)
	}
	return cps
}

func gposes(cps []store.Checkpoint) []uint64 {
	var out []uint64
	for _, cp := range cps {
		out = append(out, cp.GPos)
	}
	return out
}

// TestCheckpointRidesNextCommit: a saved checkpoint costs no commit of
// its own: it is written by the next append's transaction, or by Close.
func TestCheckpointRidesNextCommit(t *testing.T) {
	path := tempPath(t)
	ctx := t.Context()
	sid := events.NewID()
	j := mustOpen(t, path, noSync())
	if len(checkpoints(t, j)) != 0 {
		t.Fatal("a new journal has checkpoints")
	}
	if _, err := j.Append(ctx, sid, store.Any, evs(3)); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCheckpoint(3, []byte("at three")); err != nil {
		t.Fatal(err)
	}
	if cps := checkpoints(t, j); len(cps) != 0 {
		t.Fatalf("checkpoint written before any commit: %v", gposes(cps))
	}
	_, before := store.WriteStats(j)
	if _, err := j.Append(ctx, sid, store.Any, evs(1)); err != nil {
		t.Fatal(err)
	}
	if _, after := store.WriteStats(j); after != before+1 {
		t.Errorf("the append and its checkpoint took %d commits, want 1", after-before)
	}
	cps := checkpoints(t, j)
	if len(cps) != 1 || cps[0].GPos != 3 || string(cps[0].Data) != "at three" || cps[0].Err != nil {
		t.Fatalf("Checkpoints = %+v", cps)
	}
	// A later save replaces one not yet written; Close writes it.
	if err := j.SaveCheckpoint(1, []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCheckpoint(4, []byte("at four")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := j.SaveCheckpoint(4, []byte("x")); !errors.Is(err, store.ErrClosed) {
		t.Errorf("SaveCheckpoint after Close: %v, want ErrClosed", err)
	}
	j = mustOpen(t, path, noSync())
	cps = checkpoints(t, j)
	if got := gposes(cps); len(got) != 2 || got[0] != 3 || got[1] != 4 || string(cps[1].Data) != "at four" {
		t.Fatalf("after Close: %v %q, want [3 4] with the last save", got, cps[len(cps)-1].Data)
	}
	if _, err := j.Verify(ctx); err != nil {
		t.Errorf("Verify with checkpoints: %v", err)
	}
}

// TestCheckpointsKeepNewest: the journal keeps the newest MaxCheckpoints.
func TestCheckpointsKeepNewest(t *testing.T) {
	ctx := t.Context()
	sid := events.NewID()
	j := mustOpen(t, tempPath(t), noSync())
	for i := 1; i <= store.MaxCheckpoints+3; i++ {
		if _, err := j.Append(ctx, sid, store.Any, evs(1)); err != nil {
			t.Fatal(err)
		}
		if err := j.SaveCheckpoint(uint64(i), fmt.Appendf(nil, "cp%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.Append(ctx, sid, store.Any, evs(1)); err != nil {
		t.Fatal(err)
	}
	cps := checkpoints(t, j)
	if len(cps) != store.MaxCheckpoints {
		t.Fatalf("kept %v, want %d", gposes(cps), store.MaxCheckpoints)
	}
	for i, cp := range cps {
		want := uint64(i + 4)
		if cp.GPos != want || string(cp.Data) != fmt.Sprintf("cp%d", want) {
			t.Errorf("checkpoint %d = %d %q, want %d", i, cp.GPos, cp.Data, want)
		}
	}
}

func TestSaveCheckpointRefuses(t *testing.T) {
	ctx := t.Context()
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	if _, err := j.Append(ctx, events.NewID(), store.Any, evs(2)); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCheckpoint(0, []byte("x")); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("gpos 0: %v, want ErrInvalid", err)
	}
	if err := j.SaveCheckpoint(1, make([]byte, store.MaxCheckpointSize+1)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("too large: %v, want ErrInvalid", err)
	}
	if err := j.SaveCheckpoint(1, make([]byte, store.MaxCheckpointSize)); err != nil {
		t.Errorf("at the size limit: %v", err)
	}
	// Past the log's end when written: dropped, the commit goes through.
	if err := j.SaveCheckpoint(9, []byte("future")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, events.NewID(), store.Any, evs(1)); err != nil {
		t.Fatalf("the append carrying a checkpoint past the end: %v", err)
	}
	if cps := checkpoints(t, j); len(cps) != 0 {
		t.Errorf("a checkpoint past the log's end was stored: %v", gposes(cps))
	}
	j.Close()
	ro := mustOpen(t, path, &store.Options{ReadOnly: true})
	if err := ro.SaveCheckpoint(1, []byte("x")); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("read-only: %v, want ErrReadOnly", err)
	}
}

// TestCheckpointSurvivesFailedCommit: a checkpoint taken by a commit that
// failed is written by the next one.
func TestCheckpointSurvivesFailedCommit(t *testing.T) {
	ctx := t.Context()
	sid := events.NewID()
	j := mustOpen(t, tempPath(t), &store.Options{MaxSize: 256 << 10, NoSync: true})
	if _, err := j.Append(ctx, sid, store.Any, evs(1)); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCheckpoint(1, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, sid, store.Any, evs(4000)); !errors.Is(err, store.ErrFull) {
		t.Fatalf("a batch past MaxSize: %v, want ErrFull", err)
	}
	if _, err := j.Append(ctx, sid, store.Any, evs(1)); err != nil {
		t.Fatal(err)
	}
	if cps := checkpoints(t, j); len(cps) != 1 || string(cps[0].Data) != "kept" {
		t.Errorf("Checkpoints = %+v, want the one the failed commit took", cps)
	}
}

// TestCheckpointDamaged: a checkpoint whose bytes or key cannot be
// trusted is reported, not returned.
func TestCheckpointDamaged(t *testing.T) {
	ctx := t.Context()
	path := tempPath(t)
	j := mustOpen(t, path, noSync())
	if _, err := j.Append(ctx, events.NewID(), store.Any, evs(3)); err != nil {
		t.Fatal(err)
	}
	for _, g := range []uint64{1, 2, 3} {
		if err := j.SaveCheckpoint(g, []byte("checkpoint data")); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, events.NewID(), store.Any, evs(1)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("checkpoints"))
		k1, k2 := []byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0, 0, 2}
		v := bytes.Clone(b.Get(k1))
		v[len(v)-1] ^= 1
		if err := b.Put(k1, v); err != nil {
			return err
		}
		if err := b.Put(k2, []byte{1, 2}); err != nil { // shorter than a checksum
			return err
		}
		if err := b.Put([]byte("short"), []byte("x")); err != nil {
			return err
		}
		good := b.Get([]byte{0, 0, 0, 0, 0, 0, 0, 3})
		if err := b.Put([]byte{0, 0, 0, 0, 0, 0, 1, 0}, good); err != nil { // past the log's end
			return err
		}
		return b.Put([]byte{0, 0, 0, 0, 0, 0, 0, 0}, good) // position 0
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, path, &store.Options{ReadOnly: true})
	cps := checkpoints(t, j)
	if len(cps) != 6 {
		t.Fatalf("Checkpoints = %v, want 6", gposes(cps))
	}
	for _, cp := range cps {
		if cp.GPos == 3 {
			if cp.Err != nil || string(cp.Data) != "checkpoint data" {
				t.Errorf("the intact checkpoint: %+v", cp)
			}
			continue
		}
		if !errors.Is(cp.Err, store.ErrCheckpointDamaged) || cp.Data != nil {
			t.Errorf("checkpoint at %d: err %v, data %q; want ErrCheckpointDamaged and no data", cp.GPos, cp.Err, cp.Data)
		}
	}
}

// TestCheckpointEmpty: a checkpoint may be empty (its value is then its
// checksum alone).
func TestCheckpointEmpty(t *testing.T) {
	j := mustOpen(t, tempPath(t), noSync())
	if _, err := j.Append(t.Context(), events.NewID(), store.Any, evs(1)); err != nil {
		t.Fatal(err)
	}
	if err := j.SaveCheckpoint(1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(t.Context(), events.NewID(), store.Any, evs(1)); err != nil {
		t.Fatal(err)
	}
	if cps := checkpoints(t, j); len(cps) != 1 || cps[0].Err != nil || len(cps[0].Data) != 0 {
		t.Errorf("an empty checkpoint: %+v", cps)
	}
}
