package guard

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// inputSchemas is the process-wide cache of resolved input schemas. It
// is keyed by content, so sharing it between Managers is safe.
var inputSchemas schemaCache

// maxSchemas bounds the resolved-schema cache; past it the cache starts
// over (tool definitions rarely number in the thousands).
const maxSchemas = 4096

// schemaCache holds resolved input schemas by their canonical text, so a
// schema is parsed and resolved once, not on every call. It is a leaf
// structure guarded by its own mutex.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]schemaEntry
}

type schemaEntry struct {
	rs    *jsonschema.Resolved
	quick *quickSchema // nil unless rs is and the schema is in the quick subset
	err   error
}

// get returns the resolved schema for text and its quick form, or the
// reason it cannot be used. Empty text means the tool declared no schema
// (a zero entry).
func (c *schemaCache) get(text string) schemaEntry {
	if text == "" {
		return schemaEntry{}
	}
	c.mu.Lock()
	e, ok := c.m[text]
	c.mu.Unlock()
	if ok {
		return e
	}
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		e.err = fmt.Errorf("parse: %w", err)
	} else if e.rs, e.err = s.Resolve(nil); e.err == nil {
		e.quick = compileQuick(text)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSchemas {
		c.m = map[string]schemaEntry{}
	}
	c.m[text] = e
	c.mu.Unlock()
	return e
}

// ValidateArgs checks a call's arguments (JSON text) against the tool's
// input schema (JSON text; "" if the tool declared none) with
// github.com/google/jsonschema-go, the validator go-sdk itself uses;
// arguments that the schema's quick form (validate_fast.go) accepts skip
// it. It returns an *ArgumentsError naming the field and why, or nil. A
// schema that does not resolve (a dangling $ref, say) is not checked
// locally: the server remains the judge of its own schema, and the call is
// not refused for mcpledger's sake; ValidateArgs then returns an error
// wrapping ErrSchemaUnresolved, for the caller to log and go on.
func ValidateArgs(tool, schema string, args []byte) error {
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return &ArgumentsError{Tool: tool, Reason: "the arguments are not valid JSON: " + err.Error()}
	}
	if _, ok := v.(map[string]any); !ok {
		return &ArgumentsError{Tool: tool, Reason: fmt.Sprintf("the arguments must be a JSON object, not %s", jsonKind(v))}
	}
	e := inputSchemas.get(schema)
	if e.err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSchemaUnresolved, tool, e.err)
	}
	if e.rs == nil || e.quick != nil && e.quick.accepts(v) {
		return nil
	}
	if err := e.rs.Validate(v); err != nil {
		field, reason := describeSchemaError(err.Error())
		return &ArgumentsError{Tool: tool, Field: field, Reason: reason}
	}
	return nil
}

// describeSchemaError turns jsonschema-go's nested message
// ("validating root: validating /properties/o: validating
// /properties/o/properties/x: type: s has type "string", want "number"")
// into a dotted field path ("o.x") and the reason.
func describeSchemaError(msg string) (field, reason string) {
	reason = msg
	for {
		rest, ok := strings.CutPrefix(reason, "validating ")
		if !ok {
			break
		}
		loc, r, ok := strings.Cut(rest, ": ")
		if !ok {
			break
		}
		if loc != "root" {
			field = pointerToField(loc)
		}
		reason = r
	}
	// A missing required property is the field itself.
	if names, ok := strings.CutPrefix(reason, "required: missing properties: "); ok {
		var missing []string
		if json.Unmarshal([]byte(names), &missing) == nil && len(missing) > 0 {
			for i, n := range missing {
				if field != "" {
					missing[i] = field + "." + n
				}
			}
			return strings.Join(missing, ", "), "required but missing"
		}
	}
	return field, reason
}

// pointerToField turns "/properties/o/properties/x" (or items paths) into
// "o.x" / "list[]".
func pointerToField(ptr string) string {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	var out []string
	for i := 0; i < len(parts); i++ {
		switch parts[i] {
		case "properties", "patternProperties":
			if i+1 < len(parts) {
				out = append(out, strings.NewReplacer("~1", "/", "~0", "~").Replace(parts[i+1]))
				i++
			}
		case "items", "prefixItems", "additionalItems":
			// An item's index after it is skipped as every part that
			// is not one of these keywords is.
			if len(out) > 0 {
				out[len(out)-1] += "[]"
			}
		}
	}
	if len(out) == 0 {
		return ptr
	}
	return strings.Join(out, ".")
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}
