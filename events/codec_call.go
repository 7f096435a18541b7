package events

import "math"

// Call records are most of a busy journal's events, and msgpack's
// reflection costs several microseconds per record (field lookup, an
// interface conversion per field, omitempty checks). The two payloads of
// every tool call are therefore encoded by hand, into the very bytes
// msgpack's reflection gives for them: a map of the fields in declaration
// order, omitempty fields left out when zero, strings and compact integers
// in their shortest form. TestCallPayloadsEncodeAsReflection holds the two
// encodings equal; a field added to CallStarted, CallFinished or Blob must
// be added here too, or that test fails.

// msgpack codes used by the call payloads, beyond the header's.
const (
	mpFalse    = 0xc2
	mpTrue     = 0xc3
	mpFixArray = 0x90 // 0x90..0x9f
	mpArray16  = 0xdc
	mpArray32  = 0xdd
)

// appendKey appends a map key of fewer than 32 bytes.
func appendKey(dst []byte, k string) []byte {
	return append(append(dst, mpFixStr|byte(len(k))), k...)
}

// appendMapLen appends a map header for n < 16 entries.
func appendMapLen(dst []byte, n int) []byte { return append(dst, mpFixMap|byte(n)) }

// appendArrayLen appends an array header for n elements.
func appendArrayLen(dst []byte, n int) []byte {
	if n < 16 {
		return append(dst, mpFixArray|byte(n))
	}
	if n <= math.MaxUint16 {
		return append(dst, mpArray16, byte(n>>8), byte(n))
	}
	return append(dst, mpArray32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, mpTrue)
	}
	return append(dst, mpFalse)
}

// count returns how many of set are true.
func count(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// appendBlob appends b as msgpack's reflection encodes a Blob.
func appendBlob(dst []byte, b *Blob) []byte {
	dst = appendMapLen(dst, 1+count(b.Text != "", b.SHA256 != "", b.Truncated))
	if b.Text != "" {
		dst = appendStr(appendKey(dst, "text"), b.Text)
	}
	dst = appendInt(appendKey(dst, "size"), b.Size)
	if b.SHA256 != "" {
		dst = appendStr(appendKey(dst, "sha256"), b.SHA256)
	}
	if b.Truncated {
		dst = appendBool(appendKey(dst, "truncated"), true)
	}
	return dst
}

// appendCallStarted appends p as msgpack's reflection encodes it.
func appendCallStarted(dst []byte, p *CallStarted) []byte {
	dst = appendMapLen(dst, 3+count(p.Name != "", p.Caller != "", p.Policy != "", p.ApprovedBy != "",
		p.DefHash != "", p.Attempt != 0, p.RetryOf != "", p.TraceParent != "", p.TraceState != ""))
	dst = appendStr(appendKey(dst, "call_id"), p.CallID)
	dst = appendStr(appendKey(dst, "tool"), p.Tool)
	if p.Name != "" {
		dst = appendStr(appendKey(dst, "name"), p.Name)
	}
	dst = appendBlob(appendKey(dst, "args"), &p.Args)
	if p.Caller != "" {
		dst = appendStr(appendKey(dst, "caller"), p.Caller)
	}
	if p.Policy != "" {
		dst = appendStr(appendKey(dst, "policy"), p.Policy)
	}
	if p.ApprovedBy != "" {
		dst = appendStr(appendKey(dst, "approved_by"), p.ApprovedBy)
	}
	if p.DefHash != "" {
		dst = appendStr(appendKey(dst, "def_hash"), p.DefHash)
	}
	if p.Attempt != 0 {
		dst = appendInt(appendKey(dst, "attempt"), int64(p.Attempt))
	}
	if p.RetryOf != "" {
		dst = appendStr(appendKey(dst, "retry_of"), p.RetryOf)
	}
	if p.TraceParent != "" {
		dst = appendStr(appendKey(dst, "trace_parent"), p.TraceParent)
	}
	if p.TraceState != "" {
		dst = appendStr(appendKey(dst, "trace_state"), p.TraceState)
	}
	return dst
}

// appendCallFinished appends p as msgpack's reflection encodes it.
func appendCallFinished(dst []byte, p *CallFinished) []byte {
	dst = appendMapLen(dst, 4+count(p.Error != "", len(p.Signals) != 0, p.RenderedChars != 0, p.CutChars != 0, p.WireBytes != 0, p.Retrying))
	dst = appendStr(appendKey(dst, "call_id"), p.CallID)
	dst = appendStr(appendKey(dst, "outcome"), p.Outcome)
	if p.Error != "" {
		dst = appendStr(appendKey(dst, "error"), p.Error)
	}
	dst = appendBlob(appendKey(dst, "result"), &p.Result)
	dst = appendInt(appendKey(dst, "duration_ns"), p.DurationNs)
	if len(p.Signals) != 0 {
		dst = appendArrayLen(appendKey(dst, "signals"), len(p.Signals))
		for _, s := range p.Signals {
			dst = appendStr(dst, s)
		}
	}
	if p.RenderedChars != 0 {
		dst = appendInt(appendKey(dst, "rendered_chars"), p.RenderedChars)
	}
	if p.CutChars != 0 {
		dst = appendInt(appendKey(dst, "cut_chars"), p.CutChars)
	}
	if p.WireBytes != 0 {
		dst = appendInt(appendKey(dst, "wire_bytes"), p.WireBytes)
	}
	if p.Retrying {
		dst = appendBool(appendKey(dst, "retrying"), true)
	}
	return dst
}
