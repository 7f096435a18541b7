package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	rt "github.com/mcpledger/mcpledger/runtime"
)

// What run, serve and call tell the user about the configuration: a
// config file that cannot be used refuses the start (exit 4), every
// entry the reading skipped is printed with its reason, and `run --once`
// with nothing to run exits 5.

// Exit statuses of config errors (see exitCode; 3 is a call's outcome
// unknown).
const (
	exitConfigUnusable = 4
	exitNothingToRun   = 5
)

// configExitCode is the exit status of err when it is a config error,
// and 1 otherwise.
func configExitCode(err error) int {
	var ce *configError
	var ne *nothingToRunError
	switch {
	case errors.As(err, &ce):
		return exitConfigUnusable
	case errors.As(err, &ne):
		return exitNothingToRun
	}
	return 1
}

// configError is a config file that cannot be used (config.ErrUnusable):
// nothing was started. It exits with status 4 (exitConfigUnusable).
type configError struct{ err error }

func (e *configError) Error() string {
	return e.err.Error() + "\nnothing was started: fix the file(s) above and run the command again"
}
func (e *configError) Unwrap() error { return e.err }

// nothingToRunError is a `run --once` whose config names no server, or
// only entries that cannot be used. It exits with status 5
// (exitNothingToRun).
type nothingToRunError struct{ msg string }

func (e *nothingToRunError) Error() string { return e.msg }

// skippedLine is the line that says why entry s is not used.
func skippedLine(s projections.SkippedServer) string {
	detail := strings.TrimPrefix(s.Detail, fmt.Sprintf("server %q: ", s.Name))
	return fmt.Sprintf("skipped %s (%s): %s", s.Name, s.Reason, detail)
}

// printConfigReport writes to w, one a line, the file errors and
// skipped entries of v that are not in printed, and returns how many
// lines it wrote.
func printConfigReport(w io.Writer, v, printed projections.ConfigView) int {
	n := 0
	for _, e := range v.Errors {
		if !slices.Contains(printed.Errors, e) {
			fmt.Fprintln(w, "config:", e)
			n++
		}
	}
	for _, s := range v.Skipped {
		if !slices.Contains(printed.Skipped, s) {
			fmt.Fprintln(w, "config:", skippedLine(s))
			n++
		}
	}
	return n
}

// idleReason says why no server of rows was admitted, or "" when one
// was: the config names none, every entry is invalid, or every server
// waits for a decision or a config change (see printHeld).
func idleReason(rows []projections.ServerStatus, files []string) string {
	if len(rows) == 0 {
		return "no server is configured: add one to a config file (mcpledger read " + strings.Join(files, ", ") + ")"
	}
	invalid := 0
	for _, s := range rows {
		if s.State != events.StateStopped || !admissionReason(s.Reason) {
			return ""
		}
		if s.Reason == events.ReasonInvalidConfig {
			invalid++
		}
	}
	if invalid == len(rows) {
		return "no server can run: every entry of the config is skipped (see above)"
	}
	return "no server can run until a decision or a config change admits one"
}

// admissionReason reports whether a stopped server's reason is admission
// refusing it (its config or a decision), not a stop of a running one.
func admissionReason(r events.Reason) bool {
	switch r {
	case events.ReasonInvalidConfig, events.ReasonDisabled, events.ReasonNotAllowed, events.ReasonExcluded,
		events.ReasonUntrusted, events.ReasonRejected, events.ReasonPendingApproval:
		return true
	}
	return false
}

// printHeld writes, for every server of rows stopped by admission for a
// reason other than its own config, why and what to do (ws is the
// workspace: the directory an untrusted server's recovery names).
func printHeld(w io.Writer, rows []projections.ServerStatus, ws string) {
	for _, s := range rows {
		if s.State == events.StateStopped && admissionReason(s.Reason) && s.Reason != events.ReasonInvalidConfig {
			fmt.Fprintf(w, "  %s is stopped (%s): %s\n", s.Name, s.Reason, recovery(s.Name, s.Reason, s.State, ws))
		}
	}
}

// reportIdle prints, for a long-running command (run, serve) that has
// started its session, when no server was admitted, why none was, that
// the command goes on (a reload or a decision may admit one: keepOn says
// how) and each held server's reason; and in any case, when servers wait
// for trust or an approval, the command that admits them (printNextStep;
// ws is the workspace).
func reportIdle(w io.Writer, rows []projections.ServerStatus, files []string, keepOn, ws string) {
	if idle := idleReason(rows, files); idle != "" {
		fmt.Fprintf(w, "%s; %s\n", idle, keepOn)
		printHeld(w, rows, ws)
	}
	printNextStep(w, rows, ws)
}

// reportNoTools prints, for serve once its startup gate is passed, why
// it serves no tool when servers are admitted but none lists one (when
// none is admitted, reportIdle said why): each server's state, reason,
// error and recovery (ws: the workspace).
func reportNoTools(w io.Writer, rows []projections.ServerStatus, files []string, ws string) {
	if len(rows) == 0 || idleReason(rows, files) != "" {
		return
	}
	for _, s := range rows {
		if s.Tools > 0 {
			return
		}
	}
	fmt.Fprintln(w, "serving no tools yet: no server lists one (a server that becomes ready later adds its tools, announced with list_changed)")
	for _, s := range rows {
		line := fmt.Sprintf("  %s is %s", s.Name, s.State)
		if s.Reason != "" {
			line += " (" + string(s.Reason) + ")"
		}
		if s.State == events.StateReady {
			line += ": it lists no tools"
		}
		if s.Error != "" && s.State != events.StateReady {
			line += ": " + s.Error
		}
		if r := recovery(s.Name, s.Reason, s.State, ws); r != "" {
			line += "; " + r
		}
		fmt.Fprintln(w, line)
	}
}

// onceVerdict is the error `run --once` ends with, given the servers as
// they settled: nothingToRunError (exit 5) when the config names no
// server or only invalid entries; an error counting the failed and the
// invalid servers when there are any; nil otherwise. Servers stopped by a
// decision (untrusted, pending approval, disabled, ...) are not errors:
// the caller prints their reasons.
func onceVerdict(rows []projections.ServerStatus, files []string) error {
	failed, invalid := 0, 0
	for _, s := range rows {
		switch {
		case s.State == events.StateFailed:
			failed++
		case s.State == events.StateStopped && s.Reason == events.ReasonInvalidConfig:
			invalid++
		}
	}
	switch {
	case len(rows) == 0 || invalid == len(rows):
		return &nothingToRunError{msg: idleReason(rows, files)}
	case failed > 0 && invalid > 0:
		return fmt.Errorf("%d server(s) ended failed, %d skipped as invalid (see above)", failed, invalid)
	case failed > 0:
		return fmt.Errorf("%d server(s) ended failed", failed)
	case invalid > 0:
		return fmt.Errorf("%d server(s) skipped as invalid (see above)", invalid)
	}
	return nil
}

// followConfig prints on w what each config reading of m leaves out
// that the last one printed did not, as soon as it is journaled, until
// stop is called; stop prints what is left and waits. flush prints what
// is left now, so that what follows on w comes after it. (run's
// watchStates does the same.)
func followConfig(m *rt.Manager, w io.Writer) (flush, stop func()) {
	views, cancel := m.Subscribe()
	flushc := make(chan chan struct{})
	quit := make(chan struct{})
	var r configReporter
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case v := <-views:
				r.report(w, v)
			case ack := <-flushc:
				r.report(w, m.Snapshot())
				close(ack)
			case <-quit:
				r.report(w, m.Snapshot())
				return
			}
		}
	})
	flush = func() {
		ack := make(chan struct{})
		flushc <- ack
		<-ack
	}
	return flush, func() {
		cancel()
		close(quit)
		wg.Wait()
	}
}

// configReporter prints the config report of successive views, each
// line once (printConfigReport). Views may arrive late (a subscriber's
// view and a newer snapshot): one older than the last reported is
// passed over.
type configReporter struct {
	printed projections.ConfigView
	seq     uint64
}

// report prints what v's report adds and returns how many lines.
func (r *configReporter) report(w io.Writer, v *rt.View) int {
	if v.Seq < r.seq {
		return 0
	}
	r.seq = v.Seq
	n := printConfigReport(w, v.Config, r.printed)
	r.printed = v.Config
	return n
}
