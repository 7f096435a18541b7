package guard

import (
	"encoding/json"
	"math"
	"slices"
	"unicode/utf8"
)

// A quick check of the common schemas, before jsonschema-go.
//
// jsonschema-go validates by reflection and wraps every level's result in
// a formatted error: for a one-field object that is 3.5 µs per call on a
// warm cache, more on a busy one, and about a fifth of what Relaxed mode
// adds to a call. Most tools' input schemas use a handful of keywords
// (type, properties, required, additionalProperties, items, enum, the
// bounds of numbers, strings and arrays, and annotations), and checking
// those on the decoded arguments is a few map lookups.
//
// quickSchema is only ever allowed to accept: when it passes the
// arguments they are valid; when it does not (or the schema uses any
// other keyword anywhere), jsonschema-go decides, and its error is the
// one the caller sees. TestQuickSchemaAgrees compares the two on random
// schemas and arguments.

// JSON types as bits of quickSchema.types.
const (
	jtNull = 1 << iota
	jtBoolean
	jtObject
	jtArray
	jtNumber
	jtInteger
	jtString
)

var jsonTypeBits = map[string]uint8{"null": jtNull, "boolean": jtBoolean, "object": jtObject,
	"array": jtArray, "number": jtNumber, "integer": jtInteger, "string": jtString}

// quickSchema is a schema in the subset the quick check understands.
type quickSchema struct {
	never      bool  // the schema false
	types      uint8 // allowed types; 0: any
	props      map[string]*quickSchema
	required   []string
	extra      *quickSchema // additionalProperties; nil: any
	items      *quickSchema // nil: any
	enum       []string     // the string members of enum
	enumStrict bool         // enum is present
	// Bounds, as jsonschema-go applies them: numeric ones to numbers,
	// lengths in code points to strings, item counts to arrays. A nil
	// bound or a negative count is absent.
	minimum, maximum, exclusiveMinimum, exclusiveMaximum *float64
	minLength, maxLength, minItems, maxItems             int
}

// quickAnnotations are keywords that do not affect validation.
var quickAnnotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true, "format": true, "$schema": true}

// compileQuick returns the quick form of the schema text, or nil if the
// schema uses anything beyond the subset.
func compileQuick(text string) *quickSchema {
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return nil
	}
	return quickOf(v)
}

func quickOf(v any) *quickSchema {
	q := &quickSchema{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
	switch v := v.(type) {
	case bool:
		q.never = !v
		return q
	case map[string]any:
		for k, kv := range v {
			if quickAnnotations[k] {
				continue
			}
			if !q.set(k, kv) {
				return nil
			}
		}
		return q
	}
	return nil
}

// set applies keyword k with value v, reporting whether it is in the
// subset.
func (q *quickSchema) set(k string, v any) bool {
	switch k {
	case "type":
		switch t := v.(type) {
		case string:
			q.types = jsonTypeBits[t]
			return q.types != 0
		case []any:
			for _, e := range t {
				s, _ := e.(string)
				if jsonTypeBits[s] == 0 {
					return false
				}
				q.types |= jsonTypeBits[s]
			}
			return len(t) > 0
		}
	case "properties":
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		q.props = make(map[string]*quickSchema, len(m))
		for name, sv := range m {
			if q.props[name] = quickOf(sv); q.props[name] == nil {
				return false
			}
		}
		return true
	case "required":
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range l {
			s, ok := e.(string)
			if !ok {
				return false
			}
			q.required = append(q.required, s)
		}
		return true
	case "additionalProperties":
		q.extra = quickOf(v)
		return q.extra != nil
	case "items":
		q.items = quickOf(v)
		return q.items != nil
	case "enum":
		l, ok := v.([]any)
		if !ok {
			return false
		}
		q.enumStrict = true
		for _, e := range l {
			if s, ok := e.(string); ok {
				q.enum = append(q.enum, s)
			}
		}
		return true
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		f, ok := v.(float64)
		if !ok {
			return false
		}
		switch k {
		case "minimum":
			q.minimum = &f
		case "maximum":
			q.maximum = &f
		case "exclusiveMinimum":
			q.exclusiveMinimum = &f
		default:
			q.exclusiveMaximum = &f
		}
		return true
	case "minLength", "maxLength", "minItems", "maxItems":
		f, ok := v.(float64)
		if !ok || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
			return false
		}
		switch k {
		case "minLength":
			q.minLength = int(f)
		case "maxLength":
			q.maxLength = int(f)
		case "minItems":
			q.minItems = int(f)
		default:
			q.maxItems = int(f)
		}
		return true
	}
	return false
}

// accepts reports whether v (decoded by encoding/json into any) is valid
// against q for certain. False means only that jsonschema-go must decide.
func (q *quickSchema) accepts(v any) bool {
	if q.never {
		return false
	}
	if q.types != 0 && q.types&typeBits(v) == 0 {
		return false
	}
	if q.enumStrict {
		s, ok := v.(string)
		if !ok || !slices.Contains(q.enum, s) {
			return false
		}
	}
	switch v := v.(type) {
	case float64:
		if q.minimum != nil && v < *q.minimum || q.maximum != nil && v > *q.maximum ||
			q.exclusiveMinimum != nil && v <= *q.exclusiveMinimum || q.exclusiveMaximum != nil && v >= *q.exclusiveMaximum {
			return false
		}
	case string:
		if q.minLength >= 0 || q.maxLength >= 0 {
			n := utf8.RuneCountInString(v) // an absent minLength is -1
			if n < q.minLength || q.maxLength >= 0 && n > q.maxLength {
				return false
			}
		}
	case map[string]any:
		for _, r := range q.required {
			if _, ok := v[r]; !ok {
				return false
			}
		}
		for k, kv := range v {
			if p := q.props[k]; p != nil {
				if !p.accepts(kv) {
					return false
				}
			} else if q.extra != nil && !q.extra.accepts(kv) {
				return false
			}
		}
	case []any:
		if len(v) < q.minItems || q.maxItems >= 0 && len(v) > q.maxItems { // an absent minItems is -1
			return false
		}
		if q.items != nil {
			for _, e := range v {
				if !q.items.accepts(e) {
					return false
				}
			}
		}
	}
	return true
}

// typeBits returns the types v has: an integral number is both an integer
// and a number, as for jsonschema-go.
func typeBits(v any) uint8 {
	switch v := v.(type) {
	case nil:
		return jtNull
	case bool:
		return jtBoolean
	case map[string]any:
		return jtObject
	case []any:
		return jtArray
	case string:
		return jtString
	case float64:
		if _, f := math.Modf(v); f == 0 {
			return jtNumber | jtInteger
		}
		return jtNumber
	}
	return 0
}
