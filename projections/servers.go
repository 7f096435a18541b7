package projections

import (
	"maps"
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// server is what the per-session projections know about one server. Status
// and Catalog each fold their own copy with [serverFold], so they agree on
// every server's state by construction.
type server struct {
	name           string
	state          events.ServerState
	reason         events.Reason
	attempt        int
	err            string
	since          int64
	connectedSince int64
	transport      events.Transport
	filter         toolFilter
	fingerprint    string // events.Fingerprint of the config; "" until one is seen
	live           []events.Tool
	hasLive        bool // a tools.listed arrived since the server last (re)configured, stopped or failed
	liveStale      bool // the connection that listed live has been lost since
	pid            int
	protoVersion   string
	serverName     string
	serverVersion  string
	withheld       []string // tools whose definitions no longer match the approval, sorted
	auth           authRecord
}

// visibleLive reports whether the server's live tools are in the catalog:
// from its first tools.listed in a connection attempt on, while ready, and
// (stale, see liveStale) while it reconnects: reconnecting, and the
// launching and handshaking of the next attempts.
func (s *server) visibleLive() bool {
	if !s.hasLive {
		return false
	}
	switch s.state {
	case events.StateReady, events.StateReconnecting, events.StateLaunching, events.StateHandshaking:
		return true
	}
	return false
}

// serverFold folds the events of one session into per-server records.
type serverFold struct {
	sess    sessionTracker
	servers map[string]*server
}

func newServerFold() serverFold {
	return serverFold{servers: map[string]*server{}}
}

// get returns the record of name, creating a configuring one first seen at
// time t.
func (f *serverFold) get(name string, t int64) *server {
	s, ok := f.servers[name]
	if !ok {
		s = &server{name: name, state: events.StateConfiguring, since: t}
		f.servers[name] = s
	}
	return s
}

// sortedNames returns the names of every known server in order.
func (f *serverFold) sortedNames() []string {
	return slices.Sorted(maps.Keys(f.servers))
}

// apply folds e and reports whether it changed anything.
func (f *serverFold) apply(e events.Event) bool {
	ok, fresh := f.sess.admit(e)
	if !ok {
		return false
	}
	if fresh {
		clear(f.servers)
	}
	switch p := e.Payload.(type) {
	case *events.SessionStarted:
		return fresh
	case *events.ConfigObserved:
		for i := range p.Servers {
			f.observe(&p.Servers[i], e.Time)
		}
	case *events.ServerTransitioned:
		if e.Server == "" {
			return false
		}
		f.transition(f.get(e.Server, e.Time), p, e.Time)
	case *events.ProcessSpawned:
		if e.Server == "" {
			return false
		}
		f.get(e.Server, e.Time).pid = p.PID
	case *events.ProcessExited:
		s, ok := f.servers[e.Server]
		if !ok || s.pid != p.PID {
			return false
		}
		s.pid = 0
	case *events.HandshakeCompleted:
		if e.Server == "" {
			return false
		}
		s := f.get(e.Server, e.Time)
		s.protoVersion, s.serverName, s.serverVersion = p.ProtocolVersion, p.ServerName, p.ServerVersion
	case *events.ToolsListed:
		if e.Server == "" {
			return false
		}
		s := f.get(e.Server, e.Time)
		if s.attempt != 0 && p.Attempt != s.attempt {
			return false // a listing from an earlier attempt, arriving late
		}
		s.live, s.hasLive, s.liveStale = cloneTools(p.Tools), true, false
	case *events.ToolsChanged:
		if e.Server == "" {
			return false
		}
		s := f.get(e.Server, e.Time)
		s.withheld = nil
		for _, c := range p.Changed {
			if c.Listed != "" {
				s.withheld = append(s.withheld, c.Name)
			}
		}
		slices.Sort(s.withheld)
	case *events.AuthSignedIn, *events.AuthRefreshed, *events.AuthFailed, *events.AuthSignedOut:
		s, ok := f.servers[e.Server]
		if !ok {
			return false // a sign-in for a server the session does not run (an offline login)
		}
		s.applyAuth(p, e.Time)
	default:
		return false
	}
	return true
}

// observe records one server's config from a config reading. A server seen
// for the first time is configuring; so is one that was stopped because it
// was removed and now is configured again. Every other state changes only
// by transitions. Servers missing from the reading keep their record until
// their transition to stopped (removed) arrives, and stay listed after it.
func (f *serverFold) observe(c *events.ServerConfig, t int64) {
	if c.Name == "" {
		return
	}
	s, known := f.servers[c.Name]
	if !known || s.state == events.StateStopped && s.reason == events.ReasonRemoved {
		s = &server{name: c.Name, state: events.StateConfiguring, since: t}
		f.servers[c.Name] = s
	}
	s.transport = c.Transport
	s.filter = newToolFilter(c.IncludeTools, c.ExcludeTools)
	s.fingerprint = events.Fingerprint(c)
}

// transition applies one lifecycle transition: the only way a known
// server's state changes.
func (f *serverFold) transition(s *server, p *events.ServerTransitioned, t int64) {
	s.state, s.reason, s.attempt, s.since = p.To, p.Reason, p.Attempt, t
	if p.Error != nil {
		s.err = p.Error.String()
	}
	s.connectedSince = 0
	switch p.To {
	case events.StateReady:
		s.connectedSince = t
		s.err = ""
		s.liveStale = false
	case events.StateReconnecting:
		s.liveStale = true
	case events.StateLaunching: // a new attempt: its process.spawned sets the pid
		s.pid = 0
	case events.StateConfiguring:
		s.err = ""
		s.withheld = nil
		s.live, s.hasLive, s.liveStale = nil, false, false
		s.protoVersion, s.serverName, s.serverVersion = "", "", ""
		s.pid = 0
	case events.StateStopped, events.StateFailed:
		s.live, s.hasLive, s.liveStale = nil, false, false
		s.pid = 0
	}
}

// cloneTools returns a deep copy of ts (nil for an empty list).
func cloneTools(ts []events.Tool) []events.Tool {
	if len(ts) == 0 {
		return nil
	}
	out := make([]events.Tool, len(ts))
	for i, t := range ts {
		t.Annotations = cloneAnnotations(t.Annotations)
		out[i] = t
	}
	return out
}

// cloneAnnotations copies a so no pointer is shared with it.
func cloneAnnotations(a events.ToolAnnotations) events.ToolAnnotations {
	return events.ToolAnnotations{
		ReadOnly: cloneBool(a.ReadOnly), Destructive: cloneBool(a.Destructive),
		Idempotent: cloneBool(a.Idempotent), OpenWorld: cloneBool(a.OpenWorld),
	}
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}
