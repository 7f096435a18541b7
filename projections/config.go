package projections

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// ConfigReport is what one session's latest config reading could not
// use, and why: the problems with whole files, the entries that are
// invalid, and the entries shadowed by a source of higher priority. Each
// config.observed of the session replaces the report whole. It follows
// the session opened by the latest session.started, as [Status] does.
type ConfigReport struct {
	sess sessionTracker
	view ConfigView
}

// ConfigView is a snapshot of a [ConfigReport].
type ConfigView struct {
	// Workspace is the reading's workspace directory (canonical; "" for
	// none): where trust and approvals apply.
	Workspace string `json:"workspace,omitempty"`
	// Errors are problems with whole sources, each "file[:line:col]:
	// what is wrong; what to do", as the reading listed them.
	Errors []string `json:"errors,omitempty"`
	// Skipped are the entries the reading could not use, sorted by name
	// (for one name: invalid before duplicate, then as read).
	Skipped []SkippedServer `json:"skipped,omitempty"`
}

// SkippedServer is one config entry that was read but is not used.
type SkippedServer struct {
	Name string `json:"name"`
	// Reason is invalid_config (the entry cannot be used as written) or
	// duplicate (a source of higher priority defines the same name).
	Reason events.Reason `json:"reason"`
	// Detail says what is wrong and what to do, with the entry's
	// file:line:col.
	Detail string `json:"detail"`
}

// NewConfigReport returns an empty report.
func NewConfigReport() *ConfigReport { return &ConfigReport{} }

// Apply folds e into the report. Kinds other than config.observed and
// session.started are ignored.
func (r *ConfigReport) Apply(e events.Event) {
	ok, fresh := r.sess.admit(e)
	if !ok {
		return
	}
	if fresh {
		r.view = ConfigView{}
	}
	p, ok := e.Payload.(*events.ConfigObserved)
	if !ok {
		return
	}
	v := ConfigView{Workspace: p.Workspace, Errors: slices.Clone(p.Errors)}
	for i := range p.Servers {
		if c := &p.Servers[i]; c.Invalid != "" {
			v.Skipped = append(v.Skipped, SkippedServer{Name: c.Name, Reason: events.ReasonInvalidConfig, Detail: c.Invalid})
		}
	}
	for _, s := range p.Shadowed {
		v.Skipped = append(v.Skipped, SkippedServer{Name: s.Name, Reason: events.ReasonDuplicate,
			Detail: fmt.Sprintf("server %q at %s is not used: the one at %s has priority; rename or remove one", s.Name, s.At, s.Winner)})
	}
	slices.SortStableFunc(v.Skipped, func(a, b SkippedServer) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(skipRank(a.Reason), skipRank(b.Reason)))
	})
	r.view = v
}

func skipRank(r events.Reason) int {
	if r == events.ReasonInvalidConfig {
		return 0
	}
	return 1
}

// View returns a copy of the report.
func (r *ConfigReport) View() ConfigView {
	return ConfigView{Workspace: r.view.Workspace, Errors: slices.Clone(r.view.Errors), Skipped: slices.Clone(r.view.Skipped)}
}
