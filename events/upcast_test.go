package events

import (
	"errors"
	"reflect"
	"testing"
)

// TestUpcastProcessExitedV1: each way v1 recorded an exit (Go's
// ProcessState.String) becomes v2's ExitCode and Signal, and the stderr
// tail its lines.
func TestUpcastProcessExitedV1(t *testing.T) {
	for _, tt := range []struct {
		status, stderr string
		want           ProcessExited
	}{
		{"exit status 0", "", ProcessExited{}},
		{"exit status 3", "a\nb\n\n", ProcessExited{ExitCode: 3, StderrTail: []string{"a", "b"}}},
		{"signal: killed", "a", ProcessExited{ExitCode: -1, Signal: "killed", StderrTail: []string{"a"}}},
		{"signal: segmentation fault (core dumped)", "", ProcessExited{ExitCode: -1, Signal: "segmentation fault (core dumped)"}},
		{"stop signal: stopped", "", ProcessExited{ExitCode: -1, Signal: "stop signal: stopped"}},
		{"continued", "", ProcessExited{ExitCode: -1, Signal: "continued"}},
		{"", "", ProcessExited{}}, // no status recorded
	} {
		old := &ProcessExitedV1{Attempt: 2, PID: 9, Status: tt.status, StderrTail: tt.stderr, Expected: true}
		got, err := Upcast(KindProcessExited, 1, old)
		if err != nil {
			t.Errorf("%q: %v", tt.status, err)
			continue
		}
		want := tt.want
		want.Attempt, want.PID, want.Expected = 2, 9, true
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("%q %q: upcast to %+v, want %+v", tt.status, tt.stderr, got, &want)
		}
	}
	if _, err := Upcast(KindProcessExited, 1, &ProcessExitedV1{Status: "exit status x"}); err == nil {
		t.Error("an exit status that is not a number upcast without error")
	}
}

// TestUpcastRefuses: Upcast fails with ErrNoUpcaster when no chain leads
// from what it is given to the current payload of the kind.
func TestUpcastRefuses(t *testing.T) {
	for name, tt := range map[string]struct {
		kind Kind
		v    uint16
		old  any
	}{
		"wrong v1 struct":      {KindProcessExited, 1, &ProcessExited{}},
		"no step from v0":      {KindProcessExited, 0, &ProcessExitedV1{}},
		"no step for the kind": {KindPingFailed, 0, &PingFailed{}},
		"another kind":         {KindPingFailed, 1, &TimerFired{}},
		"not a payload":        {KindPingFailed, 1, "x"},
	} {
		if _, err := Upcast(tt.kind, tt.v, tt.old); !errors.Is(err, ErrNoUpcaster) {
			t.Errorf("%s: err %v, want ErrNoUpcaster", name, err)
		}
	}
	// A current payload needs no step.
	p := &ProcessExited{PID: 1}
	if got, err := Upcast(KindProcessExited, 2, p); err != nil || got != p {
		t.Errorf("Upcast of a current payload = %v, %v", got, err)
	}
}
