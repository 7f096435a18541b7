package gateway

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
)

// extrasCatalog folds the resources, resource templates and prompts that
// ready servers listed, from the session's own events as they are
// journaled: handshake.completed (capabilities), resources.listed,
// prompts.listed and server.transitioned. A server's lists are shown only
// while it is ready and only if they come from its current attempt.
// Apply runs on the Manager's loop (inside the journal append), so it only
// updates maps and signals; readers take snapshots.
type extrasCatalog struct {
	mu      sync.Mutex
	servers map[string]*extrasServer
	version uint64
	changed chan struct{} // capacity 1: "the version moved"
}

type extrasServer struct {
	state   events.ServerState
	attempt int // of the latest transition

	capsAttempt int
	caps        events.Capabilities

	resAttempt int
	resources  []events.Resource
	templates  []events.ResourceTemplate

	promptAttempt int
	prompts       []events.Prompt
}

func newExtrasCatalog() *extrasCatalog {
	return &extrasCatalog{servers: map[string]*extrasServer{}, changed: make(chan struct{}, 1)}
}

// relevant reports whether the catalog folds events of kind k.
func relevant(k events.Kind) bool {
	switch k {
	case events.KindHandshakeCompleted, events.KindResourcesListed, events.KindPromptsListed, events.KindServerTransitioned:
		return true
	}
	return false
}

// apply folds evs.
func (c *extrasCatalog) apply(evs []events.Event) {
	hit := false
	for i := range evs {
		if relevant(evs[i].Kind) {
			hit = true
			break
		}
	}
	if !hit {
		return
	}
	c.mu.Lock()
	moved := false
	for i := range evs {
		e := &evs[i]
		if !relevant(e.Kind) {
			continue
		}
		s := c.servers[e.Server]
		if s == nil {
			s = &extrasServer{}
			c.servers[e.Server] = s
		}
		switch p := e.Payload.(type) {
		case *events.ServerTransitioned:
			s.state, s.attempt = p.To, p.Attempt
		case *events.HandshakeCompleted:
			s.capsAttempt, s.caps = p.Attempt, p.Capabilities
		case *events.ResourcesListed:
			if p.Error != "" && len(p.Resources) == 0 && len(p.Templates) == 0 && s.resAttempt == p.Attempt {
				continue // a failed re-listing keeps what the attempt listed before
			}
			s.resAttempt, s.resources, s.templates = p.Attempt, p.Resources, p.Templates
		case *events.PromptsListed:
			if p.Error != "" && len(p.Prompts) == 0 && s.promptAttempt == p.Attempt {
				continue
			}
			s.promptAttempt, s.prompts = p.Attempt, p.Prompts
		}
		moved = true
	}
	if moved {
		c.version++
	}
	c.mu.Unlock()
	if moved {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
}

// extrasServerView is one ready server's lists, as a snapshot.
type extrasServerView struct {
	Server    string
	Attempt   int
	Caps      events.Capabilities
	Resources []events.Resource
	Templates []events.ResourceTemplate
	Prompts   []events.Prompt
}

// snapshot returns the lists of every ready server, sorted by server name,
// the catalog's version, and whether every ready server has listed what
// its capabilities promise in its current attempt (settled).
func (c *extrasCatalog) snapshot() (out []extrasServerView, version uint64, settled bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	settled = true
	for name, s := range c.servers {
		if s.state != events.StateReady {
			continue
		}
		v := extrasServerView{Server: name, Attempt: s.attempt}
		if s.capsAttempt == s.attempt {
			v.Caps = s.caps
		}
		if s.resAttempt == s.attempt {
			v.Resources, v.Templates = s.resources, s.templates
		} else if v.Caps.Resources {
			settled = false
		}
		if s.promptAttempt == s.attempt {
			v.Prompts = s.prompts
		} else if v.Caps.Prompts {
			settled = false
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b extrasServerView) int { return strings.Compare(a.Server, b.Server) })
	return out, c.version, settled
}

// teeJournal is the runtime.Journal of the Manager a gateway fronts: every
// append goes to the real journal and, once accepted, is folded into the
// extras catalog, and its session noted (Attach checks it).
type teeJournal struct {
	runtime.Journal
	g *Gateway
}

func (t teeJournal) Append(ctx context.Context, session uuid.UUID, evs []events.Event) error {
	err := t.Journal.Append(ctx, session, evs)
	if err == nil {
		t.g.journaled(session)
		t.g.extras.apply(evs)
	}
	return err
}

func (t teeJournal) AppendLater(session uuid.UUID, evs []events.Event) func(context.Context) error {
	wait := t.Journal.AppendLater(session, evs)
	t.g.journaled(session)
	t.g.extras.apply(evs)
	return wait
}
