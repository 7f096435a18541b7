package events

import (
	"fmt"
	"strconv"
	"strings"
)

// Upcasting turns a payload stored at an old schema version into the
// current struct, one version at a time (v → v+1 → … → current). Stored
// history is never rewritten: records keep their bytes and are upcast on
// read. Each historical (kind, version) has a fixture under testdata/upcast.
//
// History:
//
//	process.exited v1 → v2: v1 recorded the exit as one string as Go prints
//	it ("exit status 3", "signal: killed"); v2 splits it into ExitCode and
//	Signal and keeps the stderr tail as lines.

// ProcessExitedV1 is process.exited as schema version 1 stored it.
type ProcessExitedV1 struct {
	Attempt    int    `msgpack:"attempt" json:"attempt"`
	PID        int    `msgpack:"pid" json:"pid"`
	Status     string `msgpack:"status" json:"status"`
	StderrTail string `msgpack:"stderr_tail,omitempty" json:"stderr_tail,omitempty"`
	Expected   bool   `msgpack:"expected,omitempty" json:"expected,omitempty"`
}

// legacyPayload returns a pointer to the struct that (k, v) was stored as,
// for every historical version this build can still read.
func legacyPayload(k Kind, v uint16) (any, bool) {
	if k == KindProcessExited && v == 1 {
		return &ProcessExitedV1{}, true
	}
	return nil, false
}

// Upcast converts old, a pointer to the payload struct of (k, v), to the
// current payload of k, applying each step of the chain in order. It
// returns an error wrapping [ErrNoUpcaster] when a step is missing.
func Upcast(k Kind, v uint16, old any) (Payload, error) {
	cur := k.Version()
	for v < cur {
		next, err := upcastStep(k, v, old)
		if err != nil {
			return nil, err
		}
		old, v = next, v+1
	}
	p, ok := old.(Payload)
	if !ok || p.Kind() != k {
		return nil, fmt.Errorf("%w: %s v%d ends as %T", ErrNoUpcaster, k, v, old)
	}
	return p, nil
}

// upcastStep converts the payload of (k, v) to version v+1.
func upcastStep(k Kind, v uint16, old any) (any, error) {
	if k == KindProcessExited && v == 1 {
		o, ok := old.(*ProcessExitedV1)
		if !ok {
			return nil, fmt.Errorf("%w: %s v1 given %T", ErrNoUpcaster, k, old)
		}
		n := &ProcessExited{Attempt: o.Attempt, PID: o.PID, Expected: o.Expected}
		if code, ok := strings.CutPrefix(o.Status, "exit status "); ok {
			c, err := strconv.Atoi(code)
			if err != nil {
				return nil, fmt.Errorf("upcast %s v1 status %q: %w", k, o.Status, err)
			}
			n.ExitCode = c
		} else if o.Status != "" {
			n.ExitCode = -1
			n.Signal = strings.TrimPrefix(o.Status, "signal: ")
		}
		if o.StderrTail != "" {
			n.StderrTail = strings.Split(strings.TrimRight(o.StderrTail, "\n"), "\n")
		}
		return n, nil
	}
	return nil, fmt.Errorf("%w: %s v%d", ErrNoUpcaster, k, v)
}
