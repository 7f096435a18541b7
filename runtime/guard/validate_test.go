package guard

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestValidateArgs(t *testing.T) {
	const schema = `{"type":"object","properties":{"message":{"type":"string"},"n":{"type":"integer","minimum":1},` +
		`"mode":{"enum":["fast","safe"]},"opts":{"type":"object","properties":{"depth":{"type":"number"}},"required":["depth"]},` +
		`"tags":{"type":"array","items":{"type":"string"}}},"required":["message"],"additionalProperties":false}`
	const patterns = `{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z]+$"},` +
		`"t":{"type":"array","prefixItems":[{"type":"string"}]}}}`
	for _, tc := range []struct {
		name, schema, args string
		field, reason      string // "" field and reason: valid
	}{
		{"valid", schema, `{"message":"hi","n":2,"mode":"safe","opts":{"depth":1},"tags":["a"]}`, "", ""},
		{"missing required", schema, `{}`, "message", "required but missing"},
		{"wrong type", schema, `{"message":3}`, "message", `type: 3 has type "integer", want "string"`},
		{"integer", schema, `{"message":"x","n":1.5}`, "n", `type: 1.5 has type "number", want "integer"`},
		{"minimum", schema, `{"message":"x","n":0}`, "n", "minimum: 0/1 is less than 1.000000"},
		{"enum", schema, `{"message":"x","mode":"yolo"}`, "mode", "enum: yolo does not equal any of: [fast safe]"},
		{"nested required", schema, `{"message":"x","opts":{}}`, "opts.depth", "required but missing"},
		{"nested type", schema, `{"message":"x","opts":{"depth":"deep"}}`, "opts.depth", `type: deep has type "string", want "number"`},
		{"array item", schema, `{"message":"x","tags":[1]}`, "tags[]", `type: 1 has type "integer", want "string"`},
		{"additional", schema, `{"message":"x","extra":1}`, "", `unexpected additional properties ["extra"]`},
		{"not an object", schema, `[1]`, "", "the arguments must be a JSON object, not an array"},
		{"no schema: any object", "", `{"a":1}`, "", ""},
		{"no schema: still an object", "", `"s"`, "", "the arguments must be a JSON object, not a string"},
		{"draft-07 schema", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["a"]}`, `{}`, "a", "required but missing"},
		{"not JSON", schema, `{"message":`, "", "the arguments are not valid JSON: unexpected end of JSON input"},
		// Keywords beyond the quick check's: jsonschema-go alone decides.
		{"pattern", patterns, `{"name":"abc","t":["x"]}`, "", ""},
		{"pattern mismatch", patterns, `{"name":"ABC"}`, "name", `pattern: "ABC" does not match regular expression "^[a-z]+$"`},
		{"prefix item", patterns, `{"t":[1]}`, "t[]", `type: 1 has type "integer", want "string"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateArgs("mcp__s__t", tc.schema, []byte(tc.args))
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			var ae *ArgumentsError
			if !errors.As(err, &ae) || !errors.Is(err, ErrInvalidArguments) {
				t.Fatalf("err %v", err)
			}
			if ae.Field != tc.field || ae.Reason != tc.reason {
				t.Errorf("field %q reason %q, want %q %q", ae.Field, ae.Reason, tc.field, tc.reason)
			}
			if !strings.Contains(err.Error(), "nothing was sent") {
				t.Errorf("message %q", err)
			}
		})
	}
}

// TestValidateArgsUnresolvedSchema: a schema that does not resolve is not
// held against the call: ValidateArgs says so with ErrSchemaUnresolved (for
// the caller to log) and never with an *ArgumentsError.
func TestValidateArgsUnresolvedSchema(t *testing.T) {
	for _, schema := range []string{`{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`, `{"type":`} {
		err := ValidateArgs("mcp__s__t", schema, []byte(`{"x":1}`))
		var ae *ArgumentsError
		if !errors.Is(err, ErrSchemaUnresolved) || errors.As(err, &ae) || !strings.Contains(err.Error(), "mcp__s__t") {
			t.Errorf("schema %s: %v, want ErrSchemaUnresolved naming the tool", schema, err)
		}
	}
}

// TestSchemaCache: a schema is resolved once, with its quick form when it
// has one, and the cache starts over past maxSchemas entries.
func TestSchemaCache(t *testing.T) {
	var c schemaCache
	quick, slow := `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"pattern":"^x"}}}`
	if e := c.get(quick); e.err != nil || e.rs == nil || e.quick == nil {
		t.Errorf("get(%s) = %+v, want a resolved schema and its quick form", quick, e)
	}
	if e := c.get(slow); e.err != nil || e.rs == nil || e.quick != nil {
		t.Errorf("get(%s) = %+v, want a resolved schema without a quick form", slow, e)
	}
	if e := c.get(`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}}}`); e.err == nil || e.quick != nil {
		t.Errorf("a dangling $ref: %+v", e)
	}
	if len(c.m) != 3 {
		t.Errorf("%d schemas cached, want 3", len(c.m))
	}
	for n, want := range map[int]int{maxSchemas - 1: maxSchemas, maxSchemas: 1} {
		c.m = make(map[string]schemaEntry, n)
		for i := range n {
			c.m[strconv.Itoa(i)] = schemaEntry{}
		}
		c.get(quick)
		if len(c.m) != want {
			t.Errorf("with %d cached, get leaves %d, want %d", n, len(c.m), want)
		}
	}
}

// TestDescribeSchemaError: jsonschema-go's nested message as a field path
// and a reason.
func TestDescribeSchemaError(t *testing.T) {
	for _, tc := range []struct{ msg, field, reason string }{
		{`validating root: validating /properties/o: validating /properties/o/properties/x: type: s has type "string", want "number"`, "o.x", `type: s has type "string", want "number"`},
		{`validating root: required: missing properties: ["a","b"]`, "a, b", "required but missing"},
		{`validating root: validating /properties/o: required: missing properties: ["a"]`, "o.a", "required but missing"},
		{`validating root: required: missing properties: []`, "", "required: missing properties: []"},
		{`validating root: required: missing properties: nonsense`, "", "required: missing properties: nonsense"},
		{`validating /properties/l/items/0: type: 1 has type "integer", want "string"`, "l[]", `type: 1 has type "integer", want "string"`},
		{`validating /properties/a~1b~0c: x`, "a/b~c", "x"},
		{`validating /items/0: x`, "/items/0", "x"},
		{`validating /properties: x`, "/properties", "x"},
		{`validating root`, "", `validating root`},
		{`something else`, "", `something else`},
	} {
		if field, reason := describeSchemaError(tc.msg); field != tc.field || reason != tc.reason {
			t.Errorf("describeSchemaError(%q) = %q, %q; want %q, %q", tc.msg, field, reason, tc.field, tc.reason)
		}
	}
}
