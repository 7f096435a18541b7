package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatch: a burst of writes to a watched file is one reload; an
// unrelated file in a watched directory is ignored; a drop-in directory
// that reload names (as Reading.Files does) is watched once it exists;
// Watch returns when its context ends.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.json")
	sub := filepath.Join(dir, "servers.d")
	b := filepath.Join(sub, "b.json")
	write := func(p string) {
		t.Helper()
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(a)
	reloads := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, []string{a}, func() []string {
			reloads <- struct{}{}
			return []string{a, sub}
		}, &WatchOptions{Debounce: 50 * time.Millisecond})
	}()
	// fsnotify has no "ready" signal: write until the first reload.
	waitReload := func(what string, poke func()) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			poke()
			select {
			case <-reloads:
				return
			case <-tick.C:
			case <-deadline:
				t.Fatalf("%s: no reload", what)
			}
		}
	}
	waitReload("first write", func() { write(a) })
	drain := func() int {
		n := 0
		for {
			select {
			case <-reloads:
				n++
			case <-time.After(300 * time.Millisecond):
				return n
			}
		}
	}
	drain()
	for range 5 {
		write(a)
	}
	if n := drain(); n != 1 {
		t.Errorf("a burst of 5 writes gave %d reloads, want 1", n)
	}
	write(filepath.Join(dir, "unrelated.txt"))
	if n := drain(); n != 0 {
		t.Errorf("an unrelated file gave %d reloads, want 0", n)
	}
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if n := drain(); n != 1 {
		t.Errorf("creating the drop-in directory gave %d reloads, want 1", n)
	}
	write(b)
	if n := drain(); n != 1 {
		t.Errorf("a file written into the new drop-in directory gave %d reloads, want 1", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch returned %v at cancel, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}
