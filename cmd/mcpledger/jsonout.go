package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The --json outputs share one time format: an instant is an RFC 3339
// string with nanoseconds in UTC (time.RFC3339Nano), a duration a number
// of milliseconds in a field named *_ms. The packages keep their own
// representation (unix nanoseconds, the journal's and the control
// protocol's), so the CLI converts at its edge: writeJSON marshals a
// value and rewrites it with jsonTimes before printing it.

// instantKeys are the JSON fields of the shapes the CLI prints whose
// value is an instant: unix ns (the packages' int64 times) or a
// time.Time (marshaled in its own zone). An unknown instant (0, or the
// zero time.Time) is left out, as the other optional fields are.
var instantKeys = map[string]bool{
	"at": true, "time": true, "since": true, "connected_since": true,
	"expires_at": true, "signed_in_at": true, "refreshed_at": true, "signed_out_at": true,
	"next_retry": true, "expires": true,
}

// opaqueKeys hold data the CLI passes through untouched (a tool's
// schemas, a server's config as written): a field named "time" in them
// is the server's, not a time of ours.
var opaqueKeys = map[string]bool{"input_schema": true, "output_schema": true, "config": true}

// writeJSON writes v as one JSON document and a newline, its times in
// the --json time format; indent pretty-prints it.
func writeJSON(w io.Writer, v any, indent bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := jsonTimes(&out, b); err != nil {
		return err
	}
	b = out.Bytes()
	if indent {
		var ind bytes.Buffer
		if err := json.Indent(&ind, b, "", "  "); err != nil {
			return err
		}
		b = ind.Bytes()
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// jsonTimes writes the JSON value raw to out with its instants as RFC
// 3339 strings (instantKeys) and its *_ns durations as *_ms numbers,
// keeping the order of every object's fields.
func jsonTimes(out *bytes.Buffer, raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return fmt.Errorf("jsonTimes: empty value")
	}
	switch raw[0] {
	case '{':
		return jsonTimesObject(out, raw)
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return err
		}
		out.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := jsonTimes(out, it); err != nil {
				return err
			}
		}
		out.WriteByte(']')
		return nil
	}
	out.Write(raw)
	return nil
}

func jsonTimesObject(out *bytes.Buffer, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	out.WriteByte('{')
	first := true
	field := func(key string) {
		if !first {
			out.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key := kt.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return err
		}
		switch {
		case opaqueKeys[key]:
			field(key)
			out.Write(val)
		case instantKeys[key]:
			s, ok := instant(val)
			if !ok {
				field(key)
				out.Write(val)
			} else if s != "" {
				field(key)
				q, _ := json.Marshal(s)
				out.Write(q)
			}
		case strings.HasSuffix(key, "_ns") && isInteger(val):
			ns, _ := strconv.ParseInt(string(val), 10, 64)
			field(strings.TrimSuffix(key, "_ns") + "_ms")
			out.WriteString(formatMs(time.Duration(ns)))
		default:
			field(key)
			if err := jsonTimes(out, val); err != nil {
				return err
			}
		}
	}
	out.WriteByte('}')
	return nil
}

// instant reads val as an instant (unix ns, or an RFC 3339 string) and
// returns it in the --json format, "" when it is unknown (0, the zero
// time); false when val is neither (left as it is).
func instant(val json.RawMessage) (string, bool) {
	if isInteger(val) {
		ns, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil {
			return "", false
		}
		if ns == 0 {
			return "", true
		}
		return rfc3339(ns), true
	}
	var s string
	if json.Unmarshal(val, &s) != nil {
		return "", false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", false
	}
	if t.IsZero() {
		return "", true
	}
	return t.UTC().Format(time.RFC3339Nano), true
}

// rfc3339 formats unix ns as the --json instant format.
func rfc3339(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

// formatMs is d in milliseconds as a JSON number: integral when d is a
// whole number of ms, else with the fraction down to the nanosecond.
func formatMs(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

func isInteger(val json.RawMessage) bool {
	if len(val) == 0 {
		return false
	}
	for i, c := range val {
		if c == '-' && i == 0 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
