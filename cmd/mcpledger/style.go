package main

import (
	"io"
	"regexp"

	"github.com/mcpledger/mcpledger/events"
)

// style is how text output looks: on a terminal, states in colour with
// ✓/✗ health marks; piped, redirected or with NO_COLOR set
// (https://no-color.org), plain text, byte for byte what a script reads.
// --json output never goes through it.
type style struct{ on bool }

// ANSI SGR colours.
const (
	sgrReset  = "\x1b[0m"
	sgrRed    = "\x1b[31m"
	sgrGreen  = "\x1b[32m"
	sgrYellow = "\x1b[33m"
	sgrDim    = "\x1b[2m"
)

// styleFor is the style of text written to w: on only when w is a
// terminal (env.terminal) and NO_COLOR is unset or empty and TERM is not
// dumb.
func (e *env) styleFor(w io.Writer) style {
	isTerm := e.terminal
	if isTerm == nil {
		isTerm = isTerminal
	}
	return style{on: e.getenv("NO_COLOR") == "" && e.getenv("TERM") != "dumb" && isTerm(w)}
}

// paint wraps s in colour sgr when the style is on.
func (st style) paint(sgr, s string) string {
	if !st.on || s == "" {
		return s
	}
	return sgr + s + sgrReset
}

// state is a server state as a status table shows it: on a terminal
// with a health mark, ✓ ready, ✗ failed, … on its way, ○ stopped, in
// the mark's colour.
func (st style) state(s events.ServerState) string {
	if !st.on {
		return string(s)
	}
	switch s {
	case events.StateReady:
		return st.paint(sgrGreen, "✓ "+string(s))
	case events.StateFailed:
		return st.paint(sgrRed, "✗ "+string(s))
	case events.StateStopped:
		return st.paint(sgrDim, "○ "+string(s))
	}
	return st.paint(sgrYellow, "… "+string(s))
}

// approval is an approval state (approved, rejected, pending) in its
// colour.
func (st style) approval(s string) string {
	if !st.on {
		return s
	}
	switch s {
	case "approved":
		return st.paint(sgrGreen, "✓ "+s)
	case "rejected":
		return st.paint(sgrRed, "✗ "+s)
	}
	return st.paint(sgrYellow, s)
}

// sgrRE matches an SGR escape sequence, which takes no room on screen.
var sgrRE = regexp.MustCompile("\x1b\\[[0-9;]*m")
