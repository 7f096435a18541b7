// Package sdkjson decodes JSON as go-sdk's own decoder does
// (github.com/modelcontextprotocol/go-sdk/internal/json): segmentio's
// decoder, object keys matched to struct fields exactly (no case
// folding), nesting at most 1000 deep. The call path decodes with it
// what go-sdk would otherwise decode (the gateway's fast calls, a stdio
// server's messages, text results), so that it reads a message as go-sdk
// would, at a third of encoding/json's cost and without the 32 KiB buffer
// go-sdk's decoder allocates per call. It owns nothing but Unmarshal and
// must not grow state or I/O.
package sdkjson

import (
	stdjson "encoding/json"
	"errors"

	"github.com/segmentio/encoding/json"
)

// maxDepth is go-sdk's bound on nesting.
const maxDepth = 1000

// ErrTooDeep is returned for a value nested deeper than go-sdk accepts.
var ErrTooDeep = errors.New("sdkjson: exceeded maximum nesting depth of 1000")

// Unmarshal decodes data, one JSON value and white space, into v, as
// go-sdk decodes: keys matched exactly, nesting at most 1000 deep.
func Unmarshal(data []byte, v any) error {
	if tooDeep(data) {
		return ErrTooDeep
	}
	rest, err := json.Parse(data, v, json.DontMatchCaseInsensitiveStructFields)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return errors.New("sdkjson: data after the value")
	}
	return nil
}

// tooDeep reports whether data nests objects and arrays more than
// maxDepth deep (strings skipped), as go-sdk's checkMaxDepth does.
func tooDeep(data []byte) bool {
	depth := 0
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxDepth {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// Object is a JSON object's members, undecoded. Decode objects into it
// rather than into a map[string]json.RawMessage: segmentio's decoder makes
// such a map with room for 64 members (some 3 KB) when it is nil, and an
// Object starts with room for a few (the objects of the call path have a
// handful of members).
type Object map[string]stdjson.RawMessage

// UnmarshalJSON decodes data, an object (or null), as Unmarshal does.
func (o *Object) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*o = nil
		return nil
	}
	m := make(map[string]stdjson.RawMessage, 4)
	if _, err := json.Parse(data, &m, json.DontMatchCaseInsensitiveStructFields); err != nil {
		return err
	}
	*o = m
	return nil
}
