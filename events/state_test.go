package events

import "testing"

func TestClassifiedErrorString(t *testing.T) {
	for _, tt := range []struct {
		e    *ClassifiedError
		want string
	}{
		{nil, ""},
		{&ClassifiedError{Class: ErrTimeout}, "timeout"},
		{&ClassifiedError{Class: ErrExit, Message: "exit status 3", ExitCode: 3}, "exit: exit status 3"},
	} {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.e, got, tt.want)
		}
	}
}
