package guard

import (
	"errors"
	"testing"
)

// TestArgumentsErrorMessage: the message names the tool, the field when
// there is one, and the reason, and says nothing was sent.
func TestArgumentsErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  ArgumentsError
		want string
	}{
		{ArgumentsError{Tool: "mcp__s__t", Field: "opts.depth", Reason: "required but missing"},
			"guard: invalid arguments for mcp__s__t: opts.depth: required but missing (checked against the tool's input schema; nothing was sent)"},
		{ArgumentsError{Tool: "mcp__s__t", Reason: "the arguments must be a JSON object, not an array"},
			"guard: invalid arguments for mcp__s__t: the arguments must be a JSON object, not an array (checked against the tool's input schema; nothing was sent)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !errors.Is(&tc.err, ErrInvalidArguments) {
			t.Errorf("%v is not ErrInvalidArguments", &tc.err)
		}
	}
}
