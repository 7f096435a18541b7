package runtime

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/mcpledger/mcpledger/events"
)

// DefaultDebounce is how long the watcher waits after the last change to a
// config file before it reloads: editors write a file several times.
const DefaultDebounce = 300 * time.Millisecond

// watchConfig watches every config source and reloads on change. It owns
// its loop: one reload at a time; changes that arrive while a reconcile is
// in flight are coalesced into one more reload after it. A reading equal
// to the last one (ConfigEqual: key order, whitespace, comments ignored)
// journals nothing.
func (m *Manager) watchConfig(files []string, last events.ConfigObserved) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		m.log.Warn("config watcher unavailable; use mcpledger reload", "err", err)
		return
	}
	defer w.Close()
	dirs := watchDirs(files)
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			m.log.Debug("not watching", "dir", d, "err", err)
		}
	}
	interesting := map[string]bool{}
	for _, f := range files {
		interesting[filepath.Clean(f)] = true
	}
	debounce := m.opts.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			m.log.Warn("config watcher", "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			name := filepath.Clean(ev.Name)
			if !interesting[name] && !interesting[filepath.Dir(name)] {
				continue
			}
			timer.Reset(debounce)
		case <-timer.C:
			lc := m.opts.Config()
			if ConfigEqual(last, lc.Observed) {
				m.setCallSettings(lc.Specs) // not journaled config: applied as is
				continue
			}
			ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
			if _, err := m.observeLoaded(ctx, "watch", lc); err != nil {
				m.log.Warn("reload after a config change", "err", err)
			}
			cancel()
			last = lc.Observed
			// New files (a drop-in directory created, say) are watched too.
			for _, d := range watchDirs(lc.Files) {
				if !slices.Contains(dirs, d) {
					if w.Add(d) == nil {
						dirs = append(dirs, d)
					}
				}
			}
			for _, f := range lc.Files {
				interesting[filepath.Clean(f)] = true
			}
		}
	}
}

// watchDirs returns the existing directories that hold files (watching a
// directory sees a file created, replaced or renamed into place).
func watchDirs(files []string) []string {
	var out []string
	for _, f := range files {
		for _, d := range []string{f, filepath.Dir(f)} {
			if fi, err := os.Stat(d); err == nil && fi.IsDir() && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}
