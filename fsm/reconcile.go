package fsm

import (
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// Reconciling a config reading: which servers are added, removed,
// restarted (their fingerprint changed) or put to admission again, and the
// admission reasons that a new reading may lift.

// restart stops a running server (reason) and brings it back to
// configuring for a fresh admission.
func (d *decider) restart(name string, reason events.Reason) error {
	if err := d.transition(name, TrigStop, reason, 0, nil); err != nil {
		return err
	}
	if err := d.transition(name, TrigReconfigure, events.ReasonNone, 0, nil); err != nil {
		return err
	}
	return d.admit(name)
}

// reconcile diffs a config reading against the previous one and decides a
// verdict per server: add, remove, restart (fingerprint changed), repend
// (changed and now waiting for approval), admit/deny (same config, gating
// changed) or keep.
func (d *decider) reconcile(p *events.ConfigObserved) error {
	if d.prev.Stopping {
		return nil
	}
	names := map[string]bool{}
	//determinism: builds a set whose keys are sorted below
	for n := range d.prev.Servers {
		names[n] = true
	}
	for _, c := range p.Servers {
		names[c.Name] = true
	}
	rd := &events.ReloadDecided{Trigger: p.Trigger}
	type step struct {
		name    string
		verdict string
	}
	var steps []step
	for _, name := range sortedKeys(names) {
		old, existed := d.prev.get(name)
		existed = existed && old.InConfig
		cur, _ := d.s.get(name)
		v := events.ReloadVerdict{Server: name}
		if existed {
			v.Before = events.Fingerprint(&old.Config)
		}
		if cur.InConfig {
			v.After = events.Fingerprint(&cur.Config)
		}
		switch {
		case !existed && !cur.InConfig:
			continue
		case existed && !cur.InConfig:
			v.Verdict = events.VerdictRemove
		case !existed:
			v.Verdict = events.VerdictAdd
		case v.Before != v.After:
			v.Verdict = events.VerdictRestart
			if r, _ := Admission(&d.s.Config, &cur.Config); r == events.ReasonPendingApproval {
				v.Verdict = events.VerdictRepend
			}
		default:
			wasOK := old.Phase != events.StateStopped || isRunReason(old.Reason)
			r, _ := Admission(&d.s.Config, &cur.Config)
			switch {
			case wasOK && r != events.ReasonNone:
				v.Verdict = events.VerdictDeny
			case !wasOK && r == events.ReasonNone && isAdmissionReason(old.Reason):
				v.Verdict = events.VerdictAdmit
			case !wasOK && r != old.Reason && isAdmissionReason(old.Reason):
				v.Verdict = events.VerdictDeny // refused still, for another reason
			default:
				v.Verdict = events.VerdictKeep
			}
		}
		rd.Verdicts = append(rd.Verdicts, v)
		steps = append(steps, step{name, v.Verdict})
	}
	if len(rd.Verdicts) > 0 {
		d.emit("", rd)
	}
	for _, st := range steps {
		var err error
		switch st.verdict {
		case events.VerdictRemove:
			err = d.transition(st.name, TrigStop, events.ReasonRemoved, 0, nil)
		case events.VerdictAdd:
			err = d.fresh(st.name)
		case events.VerdictRestart, events.VerdictRepend:
			err = d.restart(st.name, events.ReasonConfigChanged)
		case events.VerdictAdmit, events.VerdictDeny:
			err = d.fresh(st.name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fresh runs a fresh admission for a server: from configuring directly,
// from stopped through reconfigure, and from any running state through a
// stop first.
func (d *decider) fresh(name string) error {
	switch srv, _ := d.s.get(name); srv.Phase {
	case events.StateConfiguring:
		return d.admit(name)
	case events.StateStopped:
		if err := d.transition(name, TrigReconfigure, events.ReasonNone, 0, nil); err != nil {
			return err
		}
		return d.admit(name)
	default:
		return d.restart(name, events.ReasonConfigChanged)
	}
}

// isAdmissionReason reports whether a stopped server's reason came from
// admission (so a config change may admit it again).
func isAdmissionReason(r events.Reason) bool {
	switch r {
	case events.ReasonPendingApproval, events.ReasonRejected, events.ReasonExcluded, events.ReasonNotAllowed,
		events.ReasonDisabled, events.ReasonUntrusted, events.ReasonInvalidConfig:
		return true
	}
	return false
}

// isRunReason reports whether a stopped server's reason leaves it admitted
// (stopped for a reason that is not admission's: storm hold, a stop
// request).
func isRunReason(r events.Reason) bool {
	return r == events.ReasonStormHold || r == events.ReasonStopRequested
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	//determinism: collects keys, sorted before return
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
