package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/events"
)

// Default decider options (architecture.md, seed 003): backoff 1 s doubling
// to 30 s with full jitter, 5 attempts (launches per episode), storm breaker 5 launches per 30 s,
// 3 failed pings, a fresh retry budget after 30 s ready.
const (
	DefaultBackoffBaseMs = 1000
	DefaultBackoffMaxMs  = 30000
	DefaultMaxAttempts   = 5
	DefaultStormLimit    = 5
	DefaultStormWindowMs = 30000
	DefaultPingFailures  = 3
	DefaultStableMs      = 30000
	// DecisionVersion identifies the decider's logic. Bump it when a change
	// makes old sessions decide differently on purpose; a session decides
	// by the version its session.started recorded. Version 2: the storm
	// breaker counts crashes, not launches, and an explicit reconnect
	// forgets the crashes before it.
	DecisionVersion = 2
)

// Bounds of the decider's tunables (CheckOptions). The storm breaker keeps
// at most MaxStormLimit launch times per server; durations past MaxOptionMs
// (a day) would overflow the nanosecond arithmetic long before they made
// sense as a backoff or a window.
const (
	MaxStormLimit = maxLaunches
	MaxOptionMs   = 24 * 60 * 60 * 1000
)

// CheckOptions reports the first of o's tunables outside the range the
// decider handles, wrapping ErrOptions. Zero (or negative) fields mean
// "the default" (WithDefaults) and are in range.
func CheckOptions(o events.DeciderOptions) error {
	for _, f := range []struct {
		name     string
		val, max int64
	}{
		{"backoff_base_ms", o.BackoffBaseMs, MaxOptionMs},
		{"backoff_max_ms", o.BackoffMaxMs, MaxOptionMs},
		{"storm_window_ms", o.StormWindowMs, MaxOptionMs},
		{"stable_ms", o.StableMs, MaxOptionMs},
		{"storm_limit", int64(o.StormLimit), MaxStormLimit},
	} {
		if f.val > f.max {
			err := fmt.Errorf("%w: %s is %d, at most %d", ErrOptions, f.name, f.val, f.max)
			if f.name == "storm_limit" {
				err = fmt.Errorf("%w (to let more launches through, shorten storm_window_ms)", err)
			}
			return err
		}
	}
	return nil
}

// WithDefaults returns o with zero fields replaced by the defaults.
func WithDefaults(o events.DeciderOptions) events.DeciderOptions {
	if o.BackoffBaseMs <= 0 {
		o.BackoffBaseMs = DefaultBackoffBaseMs
	}
	if o.BackoffMaxMs <= 0 {
		o.BackoffMaxMs = DefaultBackoffMaxMs
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.StormLimit <= 0 {
		o.StormLimit = DefaultStormLimit
	}
	if o.StormWindowMs <= 0 {
		o.StormWindowMs = DefaultStormWindowMs
	}
	if o.PingFailures <= 0 {
		o.PingFailures = DefaultPingFailures
	}
	if o.StableMs <= 0 {
		o.StableMs = DefaultStableMs
	}
	if o.DecisionVersion == 0 {
		o.DecisionVersion = DecisionVersion
	}
	return o
}

// Server is the decider's view of one server.
type Server struct {
	Name   string
	Phase  events.ServerState
	Reason events.Reason
	// Attempt is the launch number within the session (monotonic); inputs
	// that name another attempt are stale and ignored.
	Attempt int
	// Retries counts failures in the current episode; backoff and
	// exhaustion follow it. Admission and explicit reconnects reset it.
	Retries int
	// Timer is the pending timer's ID (0 when none) and TimerPurpose its
	// purpose.
	Timer        uint64
	TimerPurpose string
	// ReadySince is when the server last became ready (0 when not ready).
	ReadySince int64
	// Launches are the times of this session's launches, newest last.
	Launches []int64
	// Crashes are the times of this session's crashes (failures of an
	// attempt: an unexpected exit, a failed connect, a closed transport,
	// failed pings), newest last, since the last explicit reconnect;
	// Reconnected is the time of that reconnect (0: none), before which
	// the crashes of earlier sessions (Config.RecentCrashes) no longer
	// count either.
	Crashes     []int64
	Reconnected int64
	// Config is the server's current config; InConfig is false once a
	// config reading no longer lists it.
	Config   events.ServerConfig
	InConfig bool
	// Held is true from a storm hold until the next launch: releasing a
	// hold keeps the retry budget, so a crash loop still ends in failed.
	Held bool
	// Promptable is the config hash an approval was requested for and not
	// yet decided ("" when none).
	Promptable string
	// Pins are the tool definitions the current approval pins (name →
	// ToolDefHash, sorted); Listed are the definitions of the last listing
	// of the current attempt; Withheld names the tools whose listed
	// definition differs from its pin (they leave the catalog).
	Pins     []events.KV
	Listed   []events.KV
	Withheld []string
}

// State is everything the decider knows about a session. It is a value
// folded from the session's events by [Evolve]; the zero value is a
// session before its first event.
//
// Evolve updates a State's maps in place: whoever owns a State must not
// share it with another goroutine, and must [State.Clone] it to keep an old
// version.
type State struct {
	Seed      uint64
	Options   events.DeciderOptions
	Config    events.ConfigObserved
	HasConfig bool
	Servers   map[string]*Server // values are never modified in place: see put
	LastTimer uint64             // the last timer ID scheduled; IDs start at 1
	Stopping  bool
}

// Clone returns a copy of s that shares nothing mutable with it: the map
// is copied, and the Servers it points to are never modified in place
// (Evolve replaces a server with a modified copy; slices inside a Server
// are never appended to in place). Cloning costs one pointer per server.
func (s State) Clone() State {
	s.Servers = maps.Clone(s.Servers)
	return s
}

// Server returns the named server and whether it exists.
func (s State) Server(name string) (Server, bool) {
	srv, ok := s.Servers[name]
	if !ok {
		return Server{}, false
	}
	return *srv, true
}

// get returns a copy of the named server (the zero Server if unknown).
func (s State) get(name string) (Server, bool) {
	if srv, ok := s.Servers[name]; ok {
		return *srv, true
	}
	return Server{}, false
}

// put stores srv under name as a new value, leaving any State that shares
// the old one (a clone) untouched.
func (s State) put(name string, srv Server) { s.Servers[name] = &srv }

// Names returns the servers' names, sorted.
func (s State) Names() []string {
	return slices.Sorted(maps.Keys(s.Servers))
}

// Evolve folds one event into s and returns it. It is total: an event it
// has nothing to do with leaves s unchanged. Evolve never fails, so replay
// of a recorded session always yields a state.
func Evolve(s State, e events.Event) State {
	if s.Servers == nil {
		s.Servers = map[string]*Server{}
	}
	switch p := e.Payload.(type) {
	case *events.SessionStarted:
		s.Seed = p.Seed
		s.Options = WithDefaults(p.Options)
	case *events.ConfigObserved:
		s = evolveConfig(s, p)
	case *events.ApprovalDecided:
		if srv, ok := s.get(e.Server); ok && p.Hash == srv.Config.Hash {
			srv.Config.Approval = events.ApprovalFact{Decision: p.Decision, Hash: p.Hash, By: p.By, At: e.Time, ToolHashes: p.ToolHashes}
			srv.Promptable = ""
			srv.Pins = p.ToolHashes
			s.put(e.Server, srv)
		}
	case *events.ToolsListed:
		if srv, ok := s.get(e.Server); ok && p.Attempt == srv.Attempt {
			srv.Listed = listedHashes(p.Tools)
			s.put(e.Server, srv)
		}
	case *events.ToolsPinned:
		if srv, ok := s.get(e.Server); ok {
			srv.Pins = p.Tools
			srv.Config.Approval.ToolHashes = p.Tools
			s.put(e.Server, srv)
		}
	case *events.ToolsChanged:
		if srv, ok := s.get(e.Server); ok {
			srv.Withheld = nil
			for _, c := range p.Changed {
				if c.Listed != "" {
					srv.Withheld = append(srv.Withheld, c.Name)
				}
			}
			s.put(e.Server, srv)
		}
	case *events.ServerTransitioned:
		srv, _ := s.get(e.Server)
		srv.Name = e.Server
		srv.Phase, srv.Reason = p.To, p.Reason
		if p.Attempt > 0 {
			srv.Attempt = p.Attempt
		}
		switch Trigger(p.Trigger) {
		case TrigFail:
			srv.Crashes = appendLaunch(srv.Crashes, e.Time)
		case TrigReconnect:
			srv.Retries = 0
			srv.Crashes, srv.Reconnected = nil, e.Time
		case TrigAdmit:
			if !srv.Held {
				srv.Retries = 0
			}
		}
		switch p.To {
		case events.StateLaunching:
			srv.Launches = appendLaunch(srv.Launches, e.Time)
			srv.Timer, srv.TimerPurpose = 0, ""
			srv.Held = false
		case events.StateReady:
			srv.ReadySince = e.Time
		case events.StateStopped, events.StateFailed:
			srv.Timer, srv.TimerPurpose = 0, ""
			srv.ReadySince = 0
			if p.Reason == events.ReasonStormHold {
				srv.Held = true
			}
		default:
			srv.ReadySince = 0
		}
		s.put(e.Server, srv)
	case *events.TimerScheduled:
		srv, _ := s.get(e.Server)
		srv.Timer, srv.TimerPurpose = p.TimerID, p.Purpose
		if p.Purpose == events.TimerBackoff {
			srv.Retries = p.Retry
		}
		s.put(e.Server, srv)
		s.LastTimer = max(s.LastTimer, p.TimerID)
	case *events.TimerFired:
		if srv, ok := s.get(e.Server); ok && srv.Timer == p.TimerID {
			srv.Timer, srv.TimerPurpose = 0, ""
			s.put(e.Server, srv)
		}
	case *events.ApprovalRequested:
		if srv, ok := s.get(e.Server); ok {
			srv.Promptable = p.Hash
			s.put(e.Server, srv)
		}
	case *events.StopRequested:
		if e.Server == "" {
			s.Stopping = true
		}
	case *events.ReconnectRequested:
		s = evolveReconnect(s, e, p)
	}
	return s
}

// evolveReconnect forgets the crashes of the servers an explicit
// reconnect acts on (the named one, or with no name every failed one):
// the storm breaker counts only crashes after it.
func evolveReconnect(s State, e events.Event, p *events.ReconnectRequested) State {
	for _, name := range s.Names() {
		srv := *s.Servers[name]
		acts := name == e.Server && (!p.FailedOnly || srv.Phase == events.StateFailed)
		if e.Server == "" {
			acts = srv.InConfig && srv.Phase == events.StateFailed
		}
		if acts {
			srv.Crashes, srv.Reconnected = nil, e.Time
			s.put(name, srv)
		}
	}
	return s
}

// listedHashes returns name → ToolDefHash of a listing, sorted by name (the
// first definition of a duplicated name wins, as in the catalog).
func listedHashes(tools []events.Tool) []events.KV {
	out := make([]events.KV, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	for _, t := range tools {
		if seen[t.Name] {
			continue
		}
		seen[t.Name] = true
		h := t.DefHash
		if h == "" {
			h = events.ToolDefHash(t.Name, t.Description, t.InputSchema)
		}
		out = append(out, events.KV{Key: t.Name, Value: h})
	}
	slices.SortFunc(out, func(a, b events.KV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// maxLaunches bounds how many launch (and crash) times a server keeps;
// the storm breaker needs at most its limit.
const maxLaunches = 64

func appendLaunch(l []int64, t int64) []int64 {
	n := append(slices.Clip(l), t) // never write into a shared backing array
	if len(n) > maxLaunches {
		n = n[len(n)-maxLaunches:]
	}
	return n
}

func evolveConfig(s State, p *events.ConfigObserved) State {
	s.Config, s.HasConfig = *p, true
	seen := make(map[string]bool, len(p.Servers))
	for _, c := range p.Servers {
		seen[c.Name] = true
		srv, ok := s.get(c.Name)
		if !ok {
			srv = Server{Name: c.Name, Phase: events.StateConfiguring}
		}
		if srv.Config.Hash != c.Hash || srv.Config.Approval.Hash != c.Approval.Hash || srv.Config.Approval.Decision != c.Approval.Decision {
			srv.Pins = nil
			if c.Approval.Decision == events.DecisionApprove && c.Approval.Hash == c.Hash {
				srv.Pins = c.Approval.ToolHashes
			}
		}
		srv.Config, srv.InConfig = c, true
		s.put(c.Name, srv)
	}
	//determinism: each iteration writes only its own key
	for name, srv := range s.Servers {
		if !seen[name] && srv.InConfig {
			c := *srv
			c.InConfig = false
			s.Servers[name] = &c
		}
	}
	return s
}
