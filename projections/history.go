package projections

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// HistoryVersion is the version of [History]'s fold and of its checkpoint
// encoding. Bump it whenever History.Apply changes what it keeps or how:
// a checkpoint of another version is refused with [ErrHistoryVersion], and
// its reader rebuilds History from the journal instead. A base state
// (which nothing can rebuild) of an older version is converted instead
// ([DecodeBase]).
//
// Version 2 added SessionSummary.Command; version 3 each server's crash
// times ([History.Crashes]); version 4 the protocol version of each tool
// cache entry ([ToolCache.ProtocolVersion]).
const HistoryVersion = 4

// MaxLaunches is how many launch (and crash) times History keeps per
// server, newest last: enough for any storm-breaker limit
// (fsm.MaxStormLimit).
const MaxLaunches = 64

// ErrHistoryVersion is returned by [DecodeHistory] for a checkpoint
// written by another version of the fold.
var ErrHistoryVersion = errors.New("projections: checkpoint of another history version")

// ErrHistoryEncoding is returned by [DecodeHistory] for bytes that are
// not a checkpoint.
var ErrHistoryEncoding = errors.New("projections: malformed history checkpoint")

// History is the fold of the journal that outlives a session: what a new
// session and the read commands need from every earlier one. It holds the
// tool cache and approvals (shared with a [Set] by [NewSetFrom]), each
// session's summary (servers named by its events, whether and why it
// stopped; dropped once journal.archived moves the session out), each
// server's latest launch times, its latest crash times since the last
// explicit reconnect (for the storm breaker) and the last session seen.
//
// A History can be encoded as a checkpoint ([History.Encode]) that names
// the global position of the last event folded, and decoded later to fold
// only the events after it. Encode is deterministic: two Histories that
// folded the same events encode to the same bytes, which is how a
// checkpoint is verified against a fold from the start.
//
// A History is owned by one goroutine.
type History struct {
	// GPos is the global position of the last event applied (0: none).
	GPos uint64
	// Cache and Approvals are the cross-session projections.
	Cache     *ToolCache
	Approvals *Approvals

	sessions map[sessionKey]*SessionSummary
	order    []sessionKey // sessions in order of their first event
	launches map[string][]int64
	crashes  map[string][]int64
}

// Triggers of server.transitioned that History reads (fsm's TrigFail and
// TrigReconnect): a crash, and the relaunch of a failed server by an
// explicit reconnect.
const (
	triggerFail      = "fail"
	triggerReconnect = "reconnect"
)

// SessionSummary is what History keeps about one session.
type SessionSummary struct {
	// Session is the session's ID.
	Session string `json:"session"`
	// FirstGPos is the global position of the session's first event.
	FirstGPos uint64 `json:"first_gpos"`
	// Servers are the servers the session's events name, sorted.
	Servers []string `json:"servers,omitempty"`
	// Command is the command that ran the session (session.started's:
	// run, serve, demo, call, approve, reject, reconnect, archive), "" if
	// unknown (a session summarised by a version 1 base state).
	Command string `json:"command,omitempty"`
	// Stopped reports whether the session recorded session.stopped;
	// Reason is its reason.
	Stopped bool          `json:"stopped,omitempty"`
	Reason  events.Reason `json:"reason,omitempty"`
}

// NewHistory returns the History of an empty journal.
func NewHistory() *History {
	return &History{Cache: NewToolCache(), Approvals: NewApprovals(),
		sessions: map[sessionKey]*SessionSummary{}, launches: map[string][]int64{}, crashes: map[string][]int64{}}
}

// Apply folds e into h. Events must be applied in journal (GPos) order.
func (h *History) Apply(e events.Event) {
	h.GPos = e.GPos
	h.Cache.Apply(e)
	h.Approvals.Apply(e)
	k := sessionKey(e.Session)
	s := h.sessions[k]
	if s == nil {
		s = &SessionSummary{Session: k.String(), FirstGPos: e.GPos}
		h.sessions[k] = s
		h.order = append(h.order, k)
	}
	if e.Server != "" {
		if i, found := slices.BinarySearch(s.Servers, e.Server); !found {
			s.Servers = slices.Insert(s.Servers, i, e.Server)
		}
	}
	switch p := e.Payload.(type) {
	case *events.SessionStarted:
		s.Command = p.Command
	case *events.SessionStopped:
		s.Stopped, s.Reason = true, p.Reason
	case *events.JournalArchived:
		h.forget(p.Sessions)
	case *events.ServerTransitioned:
		if p.To == events.StateLaunching {
			h.launches[e.Server] = appendTime(h.launches[e.Server], e.Time)
		}
		switch p.Trigger {
		case triggerFail:
			h.crashes[e.Server] = appendTime(h.crashes[e.Server], e.Time)
		case triggerReconnect:
			delete(h.crashes, e.Server)
		}
	case *events.ReconnectRequested:
		// An explicit reconnect of a named server (an offline one among
		// them): its crashes before it no longer count. One of every
		// failed server forgets theirs by the reconnect transitions it
		// causes.
		if e.Server != "" && !p.FailedOnly {
			delete(h.crashes, e.Server)
		}
	}
}

// appendTime appends t to the times l, keeping the newest MaxLaunches.
func appendTime(l []int64, t int64) []int64 {
	l = append(l, t)
	return l[max(len(l)-MaxLaunches, 0):] // append copies the kept 64 when it grows
}

// forget drops the summaries of archived sessions: they live in the
// archive now, and the journal's fold keeps only what is still in force.
func (h *History) forget(archived []events.ArchivedSession) {
	gone := map[sessionKey]bool{}
	for _, a := range archived {
		if k, err := parseSessionKey(a.Session); err == nil && h.sessions[k] != nil {
			gone[k] = true
			delete(h.sessions, k)
		}
	}
	h.order = slices.DeleteFunc(h.order, func(k sessionKey) bool { return gone[k] })
}

// Sessions returns every session's summary, in order of first event.
func (h *History) Sessions() []SessionSummary {
	out := make([]SessionSummary, len(h.order))
	for i, k := range h.order {
		out[i] = h.sessions[k].clone()
	}
	return out
}

// Session returns the summary of session id.
func (h *History) Session(id [16]byte) (SessionSummary, bool) {
	s, ok := h.sessions[sessionKey(id)]
	if !ok {
		return SessionSummary{}, false
	}
	return s.clone(), true
}

// Last returns the summary of the session whose first event came last.
func (h *History) Last() (SessionSummary, bool) {
	if len(h.order) == 0 {
		return SessionSummary{}, false
	}
	return h.sessions[h.order[len(h.order)-1]].clone(), true
}

// Launches returns the times (unix nanoseconds) of server's latest
// launches, at most [MaxLaunches], oldest first.
func (h *History) Launches(server string) []int64 {
	return slices.Clone(h.launches[server])
}

// Crashes returns the times (unix nanoseconds) of server's latest crashes
// (server.transitioned by fail: an unexpected exit, a failed connect, a
// closed transport, failed pings) since its last explicit reconnect, at
// most [MaxLaunches], oldest first. The storm breaker counts them.
func (h *History) Crashes(server string) []int64 {
	return slices.Clone(h.crashes[server])
}

func (s *SessionSummary) clone() SessionSummary {
	c := *s
	c.Servers = slices.Clone(s.Servers)
	return c
}

// historyDoc is History as a checkpoint encodes it: every map as a sorted
// list, so the encoding is deterministic.
type historyDoc struct {
	Version  int              `json:"version"`
	GPos     uint64           `json:"gpos"`
	Decided  []Decision       `json:"decided"`
	Pending  []PendingRequest `json:"pending"`
	Cache    []CacheEntry     `json:"cache"`
	CacheGen uint64           `json:"cache_gen"`
	Configs  []sessionConfigs `json:"configs"`
	Sessions []SessionSummary `json:"sessions"`
	Launches []serverLaunches `json:"launches"`
	Crashes  []serverLaunches `json:"crashes,omitempty"` // version 3 on
}

// sessionConfigs are the config fingerprints of a session the tool cache
// still follows (one that has not stopped).
type sessionConfigs struct {
	Session string      `json:"session"`
	Servers []events.KV `json:"servers"`
}

type serverLaunches struct {
	Server string  `json:"server"`
	Times  []int64 `json:"times"`
}

// Encode returns h as a checkpoint: deterministic bytes that
// [DecodeHistory] turns back into an equal History.
func (h *History) Encode() []byte { return h.encode(HistoryVersion) }

// encode encodes h as version v wrote it: version 1 had no session
// commands, versions 1 and 2 no crashes, versions 1 to 3 no protocol
// versions in the tool cache.
func (h *History) encode(v int) []byte {
	d := historyDoc{Version: v, GPos: h.GPos, Pending: h.Approvals.Pending(),
		Cache: h.Cache.Entries(), CacheGen: h.Cache.version, Sessions: h.Sessions()}
	if v < 4 {
		for i := range d.Cache {
			d.Cache[i].ProtocolVersion = ""
		}
	}
	if v == 1 {
		for i := range d.Sessions {
			d.Sessions[i].Command = ""
		}
	}
	for _, k := range sortedApprovalKeys(h.Approvals.decided) {
		d.Decided = append(d.Decided, h.Approvals.decided[k].clone())
	}
	for _, k := range slices.SortedFunc(maps.Keys(h.Cache.configs), func(a, b sessionKey) int { return bytes.Compare(a[:], b[:]) }) {
		sc := sessionConfigs{Session: k.String()}
		for _, name := range slices.Sorted(maps.Keys(h.Cache.configs[k])) {
			sc.Servers = append(sc.Servers, events.KV{Key: name, Value: h.Cache.configs[k][name]})
		}
		d.Configs = append(d.Configs, sc)
	}
	for _, name := range slices.Sorted(maps.Keys(h.launches)) {
		d.Launches = append(d.Launches, serverLaunches{Server: name, Times: h.launches[name]})
	}
	if v >= 3 {
		for _, name := range slices.Sorted(maps.Keys(h.crashes)) {
			d.Crashes = append(d.Crashes, serverLaunches{Server: name, Times: h.crashes[name]})
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("projections: encoding history: %v", err)) // only plain values
	}
	return b
}

// DecodeHistory returns the History a checkpoint encoded. It fails with
// [ErrHistoryVersion] for a checkpoint of another version and with
// [ErrHistoryEncoding] for bytes that are not one.
func DecodeHistory(b []byte) (*History, error) {
	v, err := historyVersion(b)
	if err != nil {
		return nil, err
	}
	if v != HistoryVersion {
		return nil, fmt.Errorf("%w: version %d, this build folds version %d", ErrHistoryVersion, v, HistoryVersion)
	}
	return decodeHistory(b)
}

// DecodeBase is [DecodeHistory] for a journal's base state, the one
// checkpoint that cannot be rebuilt from the journal: one of an older
// version is converted instead of refused. A version 1 state gives
// sessions without a Command; a version 1 or 2 state gives no crashes (it
// kept launches only, and the archived sessions ended before the archive's
// cutoff, far outside any storm window); a version 1 to 3 state gives a
// tool cache without protocol versions (the next connection negotiates).
func DecodeBase(b []byte) (*History, error) {
	v, err := historyVersion(b)
	if err != nil {
		return nil, err
	}
	if v < 1 || v > HistoryVersion {
		return nil, fmt.Errorf("%w: version %d, this build folds versions 1 to %d", ErrHistoryVersion, v, HistoryVersion)
	}
	return decodeHistory(b)
}

// BaseIs reports whether base, a base state of any version DecodeBase
// reads, is exactly h encoded as that version.
func BaseIs(base []byte, h *History) bool {
	v, err := historyVersion(base)
	return err == nil && v >= 1 && v <= HistoryVersion && bytes.Equal(base, h.encode(v))
}

func historyVersion(b []byte) (int, error) {
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrHistoryEncoding, err)
	}
	return v.Version, nil
}

func decodeHistory(b []byte) (*History, error) {
	var d historyDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHistoryEncoding, err)
	}
	h := NewHistory()
	h.GPos = d.GPos
	for _, x := range d.Decided {
		h.Approvals.decided[approvalKey{x.Workspace, x.Server}] = x
	}
	for _, x := range d.Pending {
		h.Approvals.pending[approvalKey{x.Workspace, x.Server}] = x
	}
	for _, x := range d.Cache {
		sk, err := parseSessionKey(x.Session)
		if err != nil {
			return nil, err
		}
		h.Cache.entries[cacheKey{x.Server, x.Fingerprint}] = &cacheEntry{tools: x.Tools, protocolVersion: x.ProtocolVersion,
			session: sk, seq: x.Seq, time: x.Time}
	}
	h.Cache.version = d.CacheGen
	for _, x := range d.Configs {
		sk, err := parseSessionKey(x.Session)
		if err != nil {
			return nil, err
		}
		fps := make(map[string]string, len(x.Servers))
		for _, kv := range x.Servers {
			fps[kv.Key] = kv.Value
		}
		h.Cache.configs[sk] = fps
	}
	for i := range d.Sessions {
		s := d.Sessions[i]
		sk, err := parseSessionKey(s.Session)
		if err != nil {
			return nil, err
		}
		if _, dup := h.sessions[sk]; dup {
			return nil, fmt.Errorf("%w: session %s twice", ErrHistoryEncoding, s.Session)
		}
		h.sessions[sk] = &s
		h.order = append(h.order, sk)
	}
	for _, x := range d.Launches {
		h.launches[x.Server] = x.Times
	}
	for _, x := range d.Crashes {
		h.crashes[x.Server] = x.Times
	}
	return h, nil
}

// parseSessionKey reads a session ID in the form sessionKey.String
// writes, and only that form.
func parseSessionKey(s string) (sessionKey, error) {
	var k sessionKey
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return k, fmt.Errorf("%w: session %q", ErrHistoryEncoding, s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(k[:], []byte(h)); err != nil || k.String() != s {
		return k, fmt.Errorf("%w: session %q", ErrHistoryEncoding, s)
	}
	return k, nil
}

// Stored is a checkpoint as a journal holds it: the position of the last
// event it covers, its bytes, or the error that makes them unusable. Base
// marks the base state of a journal whose first records were archived:
// the fold of those records, which nothing else in the journal can
// replace.
type Stored struct {
	GPos uint64
	Data []byte
	Err  error
	Base bool
}

// ErrNoBase is returned by [Resume] when the journal's first records were
// archived and their fold (its base state) cannot be used.
var ErrNoBase = errors.New("projections: the journal's base state (the fold of its archived records) is unusable")

// Resume returns the History of the newest usable checkpoint among cps
// (oldest first) whose position is below before (0: any), to fold the
// events after its GPos into; or an empty History when none is usable
// and the journal starts at its first event. skipped lists each newer
// checkpoint it passed over and why: damaged (the journal's error), of
// another version ([ErrHistoryVersion]) or malformed
// ([ErrHistoryEncoding]). It fails with [ErrNoBase] when it would need a
// base state that is unusable, or one at or after before.
func Resume(cps []Stored, before uint64) (h *History, skipped []error, err error) {
	for i := len(cps) - 1; i >= 0; i-- {
		cp := cps[i]
		if before != 0 && cp.GPos >= before {
			if cp.Base {
				return nil, skipped, fmt.Errorf("%w: the records before gpos %d were archived", ErrNoBase, before)
			}
			continue
		}
		if cp.Err != nil {
			skipped = append(skipped, cp.Err)
			if cp.Base {
				return nil, skipped, fmt.Errorf("%w: %w", ErrNoBase, cp.Err)
			}
			continue
		}
		decode := DecodeHistory
		if cp.Base {
			decode = DecodeBase
		}
		h, err := decode(cp.Data)
		if err == nil && h.GPos != cp.GPos {
			err = fmt.Errorf("%w: stored at gpos %d, covers gpos %d", ErrHistoryEncoding, cp.GPos, h.GPos)
		}
		if err != nil {
			err = fmt.Errorf("checkpoint at gpos %d: %w", cp.GPos, err)
			skipped = append(skipped, err)
			if cp.Base {
				return nil, skipped, fmt.Errorf("%w: %w", ErrNoBase, err)
			}
			continue
		}
		return h, skipped, nil
	}
	return NewHistory(), skipped, nil
}
