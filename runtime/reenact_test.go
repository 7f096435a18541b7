package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/runtime"
)

func readGolden(t *testing.T, path string) []events.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := replay.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestReenactGoldenJournals drives the real Manager through every recorded
// golden session against recorded answers and requires it to journal the
// same decisions.
func TestReenactGoldenJournals(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "journals", "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no golden journals")
	}
	for _, path := range files {
		name := filepath.Base(path)
		if strings.HasPrefix(name, "bad-") {
			continue
		}
		t.Run(strings.TrimSuffix(name, ".jsonl"), func(t *testing.T) {
			recorded := readGolden(t, path)
			got, err := runtime.Reenact(t.Context(), recorded)
			if err != nil {
				t.Fatal(err)
			}
			if err := replay.Compare(recorded, got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReenactCatchesDivergence: a recording in which an observation
// answers an attempt the runtime never launched does not re-enact, and one
// with an altered decision does not compare.
func TestReenactCatchesDivergence(t *testing.T) {
	path := filepath.Join("..", "testdata", "journals", "crash-loop.jsonl")
	recorded := readGolden(t, path)
	for i, e := range recorded {
		if p, ok := e.Payload.(*events.ProcessSpawned); ok {
			q := *p
			q.Attempt = 99
			recorded[i].Payload = &q
			break
		}
	}
	if _, err := runtime.Reenact(t.Context(), recorded); !errors.Is(err, runtime.ErrEffectMismatch) {
		t.Fatalf("effect divergence: got %v", err)
	}
	bad := readGolden(t, filepath.Join("..", "testdata", "journals", "bad-different-delay.jsonl"))
	got, err := runtime.Reenact(t.Context(), bad)
	if err != nil {
		t.Fatal(err)
	}
	var me *replay.MismatchError
	if err := replay.Compare(bad, got); !errors.As(err, &me) || me.Kind != replay.Different {
		t.Fatalf("altered delay: got %v", err)
	}
}
