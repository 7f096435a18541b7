package store

import (
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
)

// mapIDs is the window as a Go map and a ring, as recentIDs was before its
// compact index: the reference the index is checked against.
type mapIDs struct {
	size    int
	gpos    map[uuid.UUID]uint64
	ring    []idAt
	next    int
	pending []idAt
}

func (w *mapIDs) add(id uuid.UUID, gpos uint64) {
	w.gpos[id] = gpos
	w.pending = append(w.pending, idAt{id, gpos})
}

func (w *mapIDs) commit() {
	for _, p := range w.pending {
		if len(w.ring) < w.size {
			w.ring = append(w.ring, p)
			continue
		}
		old := w.ring[w.next]
		if w.gpos[old.id] == old.gpos {
			delete(w.gpos, old.id)
		}
		w.ring[w.next] = p
		w.next = (w.next + 1) % w.size
	}
	w.pending = w.pending[:0]
}

func (w *mapIDs) abort() {
	for _, p := range w.pending {
		if w.gpos[p.id] == p.gpos {
			delete(w.gpos, p.id)
		}
	}
	w.pending = w.pending[:0]
}

// TestRecentIDsAgree runs random transactions (adds, some of IDs already
// present, commits, aborts, resets) on a small window and checks every
// lookup against the map it replaced, and that the index holds exactly
// the entries the map does.
func TestRecentIDsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, size := range []int{1, 3, 16, 100} {
		w, ref := newRecentIDs(size), &mapIDs{size: size, gpos: map[uuid.UUID]uint64{}}
		pool := make([]uuid.UUID, 3*size+5)
		for i := range pool {
			pool[i] = uuid.New()
		}
		gpos := uint64(0)
		for step := range 20000 {
			switch op := r.IntN(100); {
			case op < 55:
				gpos++
				id := pool[r.IntN(len(pool))]
				w.add(id, gpos)
				ref.add(id, gpos)
			case op < 75:
				w.commit()
				ref.commit()
			case op < 80:
				w.abort()
				ref.abort()
			case op < 81:
				w.reset()
				ref.gpos, ref.ring, ref.next, ref.pending = map[uuid.UUID]uint64{}, nil, 0, nil
			case op < 83:
				// A transaction bigger than the window grows the index.
				for range 3 * size {
					gpos++
					id := uuid.New()
					w.add(id, gpos)
					ref.add(id, gpos)
				}
			default:
				id := pool[r.IntN(len(pool))]
				g, ok := w.lookup(id)
				wg, wok := ref.gpos[id]
				if ok != wok || g != wg {
					t.Fatalf("size %d step %d: lookup = %d,%v; map %d,%v", size, step, g, ok, wg, wok)
				}
			}
			if w.used != len(ref.gpos) {
				t.Fatalf("size %d step %d: %d slots in use, map holds %d", size, step, w.used, len(ref.gpos))
			}
		}
		for id, g := range ref.gpos {
			if got, ok := w.lookup(id); !ok || got != g {
				t.Fatalf("size %d: %v at %d in the map, lookup gives %d,%v", size, id, g, got, ok)
			}
		}
	}
}

func BenchmarkRecentIDs(b *testing.B) {
	w := newRecentIDs(RetryWindow)
	gpos := uint64(0)
	for range RetryWindow {
		gpos++
		w.add(uuid.New(), gpos)
	}
	w.commit()
	ids := make([]uuid.UUID, 1024)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// One append of one event: a miss, then add and commit.
		id := ids[i%len(ids)]
		ids[i%len(ids)][15]++
		if _, ok := w.lookup(id); ok {
			b.Fatal("hit")
		}
		gpos++
		w.add(id, gpos)
		w.commit()
	}
}
