package projections

import (
	"maps"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/events"
)

// Approval states, as [Approvals.State] returns them.
const (
	// ApprovalApproved: the latest decision approved the same config hash.
	ApprovalApproved = "approved"
	// ApprovalRejected: the latest decision rejected the same config hash.
	ApprovalRejected = "rejected"
	// ApprovalPending: no decision, or the latest decision was about another
	// hash. Only a pending server is promptable.
	ApprovalPending = "pending"
)

// Approvals folds approval decisions and requests across every session of
// the journal, keyed by (workspace root, server name). Keys compare
// exactly: the runtime journals a cleaned absolute workspace path.
//
// An Approvals is owned by one goroutine: Apply and every accessor must be
// called from it. Accessors return copies the caller owns.
type Approvals struct {
	decided map[approvalKey]Decision
	pending map[approvalKey]PendingRequest
}

type approvalKey struct {
	workspace string
	server    string
}

// Decision is the latest approval decision for one (workspace, server).
type Decision struct {
	Workspace string `json:"workspace"`
	Server    string `json:"server"`
	// Decision is [events.DecisionApprove] or [events.DecisionReject].
	Decision string `json:"decision"`
	// Hash is the config hash ([events.ConfigHash]) the decision binds to.
	Hash string `json:"hash"`
	// By says who decided.
	By string `json:"by,omitempty"`
	// At is the decision event's time (unix ns).
	At int64 `json:"at"`
	// Scope is the config scope of the server decided on.
	Scope events.Scope `json:"scope,omitempty"`
	// ToolHashes pins tool definition hashes, sorted as journaled.
	ToolHashes []events.KV `json:"tool_hashes,omitempty"`
	// Session and Seq locate the approval.decided event.
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
	// Config is the (redacted) config the decision was made for, when the
	// decision recorded it: a later config can then be explained field by
	// field (events.ChangedFields).
	Config *events.ServerConfig `json:"config,omitempty"`
}

// PendingRequest is an approval.requested that no later decision for its
// hash has answered.
type PendingRequest struct {
	Workspace string `json:"workspace"`
	Server    string `json:"server"`
	// Hash is the config hash awaiting a decision.
	Hash string `json:"hash"`
	// Previous is the hash of the last decision, if any, and Changed names
	// the hashed config fields that differ from it.
	Previous string       `json:"previous,omitempty"`
	Changed  []string     `json:"changed,omitempty"`
	Scope    events.Scope `json:"scope,omitempty"`
	// At is the request event's time (unix ns); Session and Seq locate it.
	At      int64  `json:"at"`
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
}

// ApprovalRow is one (workspace, server) in [Approvals.List]: its latest
// decision and its pending request, either of which may be nil.
type ApprovalRow struct {
	Workspace string          `json:"workspace"`
	Server    string          `json:"server"`
	Decision  *Decision       `json:"decision,omitempty"`
	Pending   *PendingRequest `json:"pending,omitempty"`
}

// NewApprovals returns an empty approvals view.
func NewApprovals() *Approvals {
	return &Approvals{decided: map[approvalKey]Decision{}, pending: map[approvalKey]PendingRequest{}}
}

// Apply folds e into the view. approval.decided (about e.Server) replaces
// the latest decision for its (workspace, server) and answers a pending
// request for the same hash; approval.requested records a pending request,
// replacing an earlier one. Other kinds are ignored. Events must be applied
// in journal order.
func (a *Approvals) Apply(e events.Event) {
	switch p := e.Payload.(type) {
	case *events.ApprovalDecided:
		k := approvalKey{p.Workspace, e.Server}
		a.decided[k] = Decision{Workspace: p.Workspace, Server: e.Server, Decision: p.Decision, Hash: p.Hash,
			By: p.By, At: e.Time, Scope: p.Scope, ToolHashes: slices.Clone(p.ToolHashes),
			Session: sessionKey(e.Session).String(), Seq: e.Seq, Config: cloneConfig(p.Config)}
		if r, ok := a.pending[k]; ok && r.Hash == p.Hash {
			delete(a.pending, k)
		}
	case *events.ToolsPinned:
		k := approvalKey{p.Workspace, e.Server}
		if d, ok := a.decided[k]; ok && d.Hash == p.Hash && d.Decision == events.DecisionApprove {
			d.ToolHashes = slices.Clone(p.Tools)
			a.decided[k] = d
		}
	case *events.ApprovalRequested:
		k := approvalKey{p.Workspace, e.Server}
		a.pending[k] = PendingRequest{Workspace: p.Workspace, Server: e.Server, Hash: p.Hash,
			Previous: p.Previous, Changed: slices.Clone(p.Changed), Scope: p.Scope,
			At: e.Time, Session: sessionKey(e.Session).String(), Seq: e.Seq}
	}
}

// Lookup returns the latest decision for server in workspace, and false if
// there is none.
func (a *Approvals) Lookup(workspace, server string) (Decision, bool) {
	d, ok := a.decided[approvalKey{workspace, server}]
	if !ok {
		return Decision{}, false
	}
	return d.clone(), true
}

// State returns [ApprovalApproved] or [ApprovalRejected] when the latest
// decision for server in workspace approved or rejected hash, and
// [ApprovalPending] otherwise: no decision, or one bound to another hash.
func (a *Approvals) State(workspace, server, hash string) string {
	d, ok := a.decided[approvalKey{workspace, server}]
	if ok && d.Hash == hash {
		switch d.Decision {
		case events.DecisionApprove:
			return ApprovalApproved
		case events.DecisionReject:
			return ApprovalRejected
		}
	}
	return ApprovalPending
}

// Pending returns the unanswered requests, sorted by workspace then server.
func (a *Approvals) Pending() []PendingRequest {
	keys := sortedApprovalKeys(a.pending)
	out := make([]PendingRequest, len(keys))
	for i, k := range keys {
		out[i] = a.pending[k].clone()
	}
	return out
}

// List returns every (workspace, server) with a decision or a pending
// request, sorted by workspace then server.
func (a *Approvals) List() []ApprovalRow {
	keys := sortedApprovalKeys(a.decided)
	keys = append(keys, sortedApprovalKeys(a.pending)...)
	slices.SortFunc(keys, compareApprovalKeys)
	keys = slices.Compact(keys)
	out := make([]ApprovalRow, len(keys))
	for i, k := range keys {
		row := ApprovalRow{Workspace: k.workspace, Server: k.server}
		if d, ok := a.decided[k]; ok {
			d = d.clone()
			row.Decision = &d
		}
		if r, ok := a.pending[k]; ok {
			r = r.clone()
			row.Pending = &r
		}
		out[i] = row
	}
	return out
}

func sortedApprovalKeys[V any](m map[approvalKey]V) []approvalKey {
	return slices.SortedFunc(maps.Keys(m), compareApprovalKeys)
}

func compareApprovalKeys(a, b approvalKey) int {
	if c := strings.Compare(a.workspace, b.workspace); c != 0 {
		return c
	}
	return strings.Compare(a.server, b.server)
}

// cloneConfig returns a deep copy of c (nil for nil).
func cloneConfig(c *events.ServerConfig) *events.ServerConfig {
	if c == nil {
		return nil
	}
	x := *c
	x.Args, x.Env, x.Headers = slices.Clone(c.Args), slices.Clone(c.Env), slices.Clone(c.Headers)
	x.IncludeTools, x.ExcludeTools = slices.Clone(c.IncludeTools), slices.Clone(c.ExcludeTools)
	x.RecentLaunches, x.RecentCrashes = slices.Clone(c.RecentLaunches), slices.Clone(c.RecentCrashes)
	x.Approval.Changed, x.Approval.ToolHashes = slices.Clone(c.Approval.Changed), slices.Clone(c.Approval.ToolHashes)
	return &x
}

func (d Decision) clone() Decision {
	d.ToolHashes = slices.Clone(d.ToolHashes)
	d.Config = cloneConfig(d.Config)
	return d
}

func (r PendingRequest) clone() PendingRequest {
	r.Changed = slices.Clone(r.Changed)
	return r
}
