package guard

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateArgs(t *testing.T) {
	const schema = `{"type":"object","properties":{"message":{"type":"string"},"n":{"type":"integer","minimum":1},` +
		`"mode":{"enum":["fast","safe"]},"opts":{"type":"object","properties":{"depth":{"type":"number"}},"required":["depth"]},` +
		`"tags":{"type":"array","items":{"type":"string"}}},"required":["message"],"additionalProperties":false}`
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
