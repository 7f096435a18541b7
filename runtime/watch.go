package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
)

// watchConfig reloads the configuration when one of its files changes
// (config.Watch), until the Manager closes. A reading equal to the last
// one (config.Equal: key order, whitespace, comments ignored) journals
// nothing; its call settings, which are not journaled, apply as they are
// (unless a file could not be read: see observeLoaded).
func (m *Manager) watchConfig(files []string, last events.ConfigObserved) {
	err := config.Watch(m.ctx, files, func() []string {
		lc := m.opts.Config()
		if config.Equal(last, lc.Observed) {
			if lc.Err() == nil {
				m.setCallSettings(lc.Specs)
			}
			return lc.Files
		}
		ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
		defer cancel()
		_, err := m.observeLoaded(ctx, "watch", lc)
		if errors.Is(err, ErrJournal) && m.awaitJournal(m.ctx) {
			// Refused while the journal failed: the change is read
			// again, and journaled, once it resumes.
			lc = m.opts.Config()
			ctx, cancel := context.WithTimeout(m.ctx, time.Minute)
			defer cancel()
			_, err = m.observeLoaded(ctx, "watch", lc)
		}
		if err != nil {
			m.log.Warn("reload after a config change", "err", err)
			return lc.Files
		}
		last = lc.Observed
		return lc.Files
	}, &config.WatchOptions{Debounce: m.opts.Debounce, Logger: m.log})
	if err != nil {
		m.log.Warn("config watcher unavailable; use mcpledger reload", "err", err)
	}
}
