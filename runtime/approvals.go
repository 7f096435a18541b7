package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

// ErrNotGated is returned when approving or rejecting a server whose
// config scope needs no approval.
var ErrNotGated = errors.New("runtime: server needs no approval: only project (.mcp.json) servers are gated")

// Approve approves server's current config hash: a pending server connects
// at once; a running one has its current tool definitions pinned.
func (m *Manager) Approve(ctx context.Context, server, by string) error {
	return m.decide(ctx, server, events.DecisionApprove, by)
}

// Reject rejects server's current config hash: it stays stopped and is not
// offered again until its config changes.
func (m *Manager) Reject(ctx context.Context, server, by string) error {
	return m.decide(ctx, server, events.DecisionReject, by)
}

func (m *Manager) decide(ctx context.Context, server, decision, by string) error {
	p := &events.ApprovalDecided{Decision: decision, By: by}
	r := &request{ev: events.Event{Kind: events.KindApprovalDecided, Server: server, Payload: p}, durable: true}
	r.check = func() error {
		srv, ok := m.state.Server(server)
		if !ok || !srv.InConfig {
			return fmt.Errorf("%w: %q", ErrUnknownServer, server)
		}
		if !srv.Config.Gated {
			return fmt.Errorf("%w (%q is from %s)", ErrNotGated, server, srv.Config.Scope)
		}
		cfg := srv.Config
		cfg.Approval, cfg.RecentLaunches, cfg.RecentCrashes = events.ApprovalFact{}, nil, nil
		p.Workspace, p.Hash, p.Scope, p.Config = m.state.Config.Workspace, srv.Config.Hash, srv.Config.Scope, &cfg
		return fsm.CheckApproval(m.state, server, p.Hash)
	}
	_, err := m.submitReq(ctx, r)
	return err
}

// ApprovalRow is one gated server's approval state, as `mcpledger
// approvals` shows it.
type ApprovalRow struct {
	Server string       `json:"server"`
	Scope  events.Scope `json:"scope"`
	// State is approved, rejected or pending.
	State string `json:"state"`
	// Hash is the server's current config hash.
	Hash string `json:"hash"`
	// DecidedHash, By and At describe the latest decision, if any.
	DecidedHash string `json:"decided_hash,omitempty"`
	Decision    string `json:"decision,omitempty"`
	By          string `json:"by,omitempty"`
	At          int64  `json:"at,omitempty"`
	// Changed names the fields that changed since the last decision (for
	// pending servers that had one).
	Changed []string `json:"changed,omitempty"`
	// Withheld names tools whose definitions changed since approval.
	Withheld []string `json:"withheld,omitempty"`
}

// Approvals lists every gated server of the current config with its
// approval state.
func (m *Manager) Approvals(ctx context.Context) ([]ApprovalRow, error) {
	var rows []ApprovalRow
	if !m.onLoop(ctx, func() { rows = approvalRows(m.state) }) {
		return nil, ErrShuttingDown
	}
	return rows, nil
}

func approvalRows(st fsm.State) []ApprovalRow {
	var rows []ApprovalRow
	for _, name := range st.Names() {
		srv, _ := st.Server(name)
		if !srv.InConfig || !srv.Config.Gated {
			continue
		}
		c := srv.Config
		row := ApprovalRow{Server: name, Scope: c.Scope, Hash: c.Hash, State: "pending",
			DecidedHash: c.Approval.Hash, Decision: c.Approval.Decision, By: c.Approval.By, At: c.Approval.At,
			Withheld: slices.Clone(srv.Withheld)}
		switch {
		case c.Approval.Hash == c.Hash && c.Approval.Decision == events.DecisionApprove:
			row.State = "approved"
		case c.Approval.Hash == c.Hash && c.Approval.Decision == events.DecisionReject:
			row.State = "rejected"
		default:
			row.Changed = slices.Clone(c.Approval.Changed)
		}
		rows = append(rows, row)
	}
	return rows
}

// Promptable lists the servers waiting for a decision (strictly pending:
// rejected ones are not offered again until their config changes).
func (v *View) Promptable() []string { return slices.Clone(v.promptable) }

// RecordApproval journals an approval decision made while no mcpledger
// holds the journal (`mcpledger approve` offline): a short session of its
// own holding the decision, decided and stopped like any session, so
// replay and verify treat it the same. cfg is the server's config as the
// workspace now has it.
func RecordApproval(ctx context.Context, j Journal, workspace string, cfg events.ServerConfig, decision, by, build string, now func() int64) (uuid.UUID, error) {
	c := cfg
	c.Approval, c.RecentLaunches, c.RecentCrashes = events.ApprovalFact{}, nil, nil
	return recordOffline(ctx, j, build, decision, now, events.Event{Kind: events.KindApprovalDecided, Server: cfg.Name,
		Payload: &events.ApprovalDecided{Workspace: workspace, Decision: decision, Hash: cfg.Hash, By: by, Scope: cfg.Scope, Config: &c}})
}

// recordOffline journals in, a decision made while no mcpledger holds
// the journal, in a short session of its own run by command: started,
// in, stopped, each input decided like any session's, so replay and
// verify treat it the same.
func recordOffline(ctx context.Context, j Journal, build, command string, now func() int64, in events.Event) (uuid.UUID, error) {
	sid := uuid.Must(uuid.NewV7())
	inputs := []events.Event{
		{Kind: events.KindSessionStarted, Payload: &events.SessionStarted{Build: build, Command: command, Options: fsm.WithDefaults(events.DeciderOptions{})}},
		in,
		{Kind: events.KindStopRequested, Payload: &events.StopRequested{Reason: events.ReasonShutdown, By: command}},
	}
	var st fsm.State
	var out []events.Event
	for _, in := range inputs {
		in.Session, in.Time, in.ID, in.Seq = sid, now(), events.NewID(), uint64(len(out)+1)
		decs, err := fsm.Decide(st, in)
		if err != nil {
			return sid, err
		}
		st = fsm.Evolve(st, in)
		out = append(out, in)
		for _, d := range decs {
			d.ID, d.Seq = events.NewID(), uint64(len(out)+1)
			st = fsm.Evolve(st, d)
			out = append(out, d)
		}
	}
	return sid, j.Append(ctx, sid, out)
}
