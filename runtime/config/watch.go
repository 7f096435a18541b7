package config

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long Watch waits after the last change to a
// config file before it reloads: editors write a file several times.
const DefaultDebounce = 300 * time.Millisecond

// WatchOptions tune [Watch]. The zero value is ready for use.
type WatchOptions struct {
	// Debounce is how long to wait after the last change (0: DefaultDebounce).
	Debounce time.Duration
	// Logger receives the watcher's own errors (nil: discarded).
	Logger *slog.Logger
}

// Watch watches files (a Reading's Files) and calls reload once changes to
// any of them have stopped for the debounce. reload returns the files of
// its new reading, which are watched from then on (a drop-in directory
// created since, say). Calls to reload never overlap: changes that arrive
// during one are coalesced into one more call after it. Watch watches
// directories, not files, so a file created, replaced or renamed into
// place is seen. It returns nil when ctx ends, or at once with an error
// when the system gives it no watcher.
func Watch(ctx context.Context, files []string, reload func() []string, o *WatchOptions) error {
	var opts WatchOptions
	if o != nil {
		opts = *o
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	var dirs []string
	interesting := map[string]bool{}
	watch := func(files []string) {
		for _, d := range watchDirs(files) {
			if slices.Contains(dirs, d) {
				continue
			}
			if err := w.Add(d); err != nil {
				opts.Logger.Debug("not watching", "dir", d, "err", err)
				continue
			}
			dirs = append(dirs, d)
		}
		for _, f := range files {
			interesting[filepath.Clean(f)] = true
		}
	}
	watch(files)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			opts.Logger.Warn("config watcher", "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Clean(ev.Name)
			if !interesting[name] && !interesting[filepath.Dir(name)] {
				continue
			}
			timer.Reset(opts.Debounce)
		case <-timer.C:
			watch(reload())
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
