package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mcpledger/mcpledger/events"
)

// maxSummary caps the payload summary of a text log line, in bytes.
const maxSummary = 240

// writeEventLine writes formatEvent(e) and a newline.
func writeEventLine(w *bufio.Writer, e *events.Event) {
	w.WriteString(formatEvent(*e))
	w.WriteByte('\n')
}

// formatEvent renders e as one readable line (no newline): time, short
// session ID, seq, kind, server ("-" for none), the cause if any, and a
// compact payload summary.
func formatEvent(e events.Event) string {
	var sb strings.Builder
	server := e.Server
	if server == "" {
		server = "-"
	}
	sb.WriteString(formatTime(e.Time))
	sb.WriteByte(' ')
	sb.WriteString(shortID(e.Session))
	sb.WriteString(" #")
	sb.WriteString(strconv.FormatUint(e.Seq, 10))
	sb.WriteByte(' ')
	sb.WriteString(string(e.Kind))
	sb.WriteByte(' ')
	sb.WriteString(server)
	if e.Cause != 0 {
		sb.WriteString(" cause=#")
		sb.WriteString(strconv.FormatUint(e.Cause, 10))
	}
	// Injection signals lead, so the summary's cut never hides them.
	if p, ok := e.Payload.(*events.CallFinished); ok && len(p.Signals) > 0 {
		sb.WriteString(" ⚠ injection-signals=")
		sb.WriteString(strings.Join(p.Signals, ","))
	}
	p := any(e.Payload)
	if cf, ok := e.Payload.(*events.CallFinished); ok && cf.Result.Text != "" {
		// The result goes last: the summary's cut takes its end, never
		// the outcome's duration and sizes after it.
		c := *cf
		c.Result = events.Blob{}
		p = struct {
			*events.CallFinished
			Result events.Blob `json:"result"`
		}{&c, cf.Result}
	}
	if s := summarize(p); s != "" {
		sb.WriteByte(' ')
		sb.WriteString(s)
	}
	return sb.String()
}

// summarize renders a payload as space-separated key=value pairs in field
// order, leaving out empty values: nested objects in braces, lists of
// scalars in brackets, lists of objects as their length.
func summarize(p any) string {
	b, err := json.Marshal(p)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	var sb strings.Builder
	writeObject(&sb, b, false)
	s := sb.String()
	if len(s) > maxSummary {
		cut := maxSummary
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// writeObject writes the JSON object b as key=value pairs, in braces when
// nested.
func writeObject(sb *strings.Builder, b []byte, braces bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		sb.Write(b)
		return
	}
	if braces {
		sb.WriteByte('{')
	}
	first := true
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			break
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		if isEmpty(raw) {
			continue
		}
		key := kt.(string)
		var val strings.Builder
		if k, v, ok := humanField(key, raw); ok {
			key = k
			val.WriteString(v)
		} else {
			writeValue(&val, raw)
		}
		if val.String() == "{}" { // an object whose fields are all empty
			continue
		}
		if !first {
			sb.WriteByte(' ')
		}
		first = false
		sb.WriteString(key)
		sb.WriteByte('=')
		sb.WriteString(val.String())
	}
	if braces {
		sb.WriteByte('}')
	}
}

// humanField is humanKey for a field's JSON value, a number or (for the
// lists of instants) an array of numbers.
func humanField(key string, raw json.RawMessage) (string, string, bool) {
	if raw[0] != '[' {
		return humanKey(key, string(raw))
	}
	var items []json.Number
	if !logInstantKeys[key] || json.Unmarshal(raw, &items) != nil {
		return "", "", false
	}
	parts := make([]string, len(items))
	for i, it := range items {
		_, v, ok := humanKey(key, it.String())
		if !ok {
			return "", "", false
		}
		parts[i] = v
	}
	return key, "[" + strings.Join(parts, ",") + "]", true
}

func writeValue(sb *strings.Builder, raw json.RawMessage) {
	switch raw[0] {
	case '{':
		writeObject(sb, raw, true)
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			sb.Write(raw)
			return
		}
		if len(items) > 0 && (items[0][0] == '{' || items[0][0] == '[') {
			sb.WriteString("[" + strconv.Itoa(len(items)) + " items]")
			return
		}
		sb.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeValue(sb, it)
		}
		sb.WriteByte(']')
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			sb.Write(raw)
			return
		}
		if s != "" && !strings.ContainsAny(s, " \t\n\"={}[],") {
			sb.WriteString(s)
			return
		}
		sb.WriteString(strconv.Quote(s))
	default:
		sb.Write(raw)
	}
}

// isEmpty reports whether a JSON value is empty: "", 0, false, null, {} or [].
func isEmpty(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case `""`, "0", "false", "null", "{}", "[]":
		return true
	}
	return false
}
