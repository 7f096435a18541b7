package guard

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// quickGen draws schemas in the quick subset and values near them.
type quickGen struct{ r *rand.Rand }

var quickTypes = []string{"null", "boolean", "object", "array", "number", "integer", "string"}

func (g quickGen) schema(depth int) any {
	if g.r.IntN(12) == 0 {
		return g.r.IntN(3) != 0 // true, mostly
	}
	s := map[string]any{}
	if g.r.IntN(4) != 0 {
		if g.r.IntN(3) == 0 {
			s["type"] = []any{quickTypes[g.r.IntN(7)], quickTypes[g.r.IntN(7)]}
		} else {
			s["type"] = quickTypes[g.r.IntN(7)]
		}
	}
	if g.r.IntN(3) == 0 {
		s["description"] = "d"
	}
	if depth < 3 && g.r.IntN(2) == 0 {
		props := map[string]any{}
		for i := range g.r.IntN(4) {
			props[fmt.Sprint("p", i)] = g.schema(depth + 1)
		}
		s["properties"] = props
		if g.r.IntN(2) == 0 {
			s["required"] = []any{"p0", "p" + fmt.Sprint(g.r.IntN(5))}
		}
		switch g.r.IntN(3) {
		case 0:
			s["additionalProperties"] = false
		case 1:
			s["additionalProperties"] = g.schema(depth + 1)
		}
	}
	if depth < 3 && g.r.IntN(4) == 0 {
		s["items"] = g.schema(depth + 1)
	}
	if g.r.IntN(6) == 0 {
		s["enum"] = []any{"a", "b", "ééé"}
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if g.r.IntN(8) == 0 {
			s[k] = []float64{0, 1, 1.5, 3, -1}[g.r.IntN(5)]
		}
	}
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems"} {
		if g.r.IntN(8) == 0 {
			s[k] = g.r.IntN(4)
		}
	}
	return s
}

func (g quickGen) value(depth int) any {
	switch g.r.IntN(9) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2:
		return float64(g.r.IntN(5)) // integral
	case 3:
		return []float64{1.5, -1, 0.5, 3.0000001}[g.r.IntN(4)]
	case 4:
		return []string{"a", "b", "c", "", "ab", "abc", "ééé", "éé"}[g.r.IntN(8)]
	case 5, 6:
		if depth < 4 {
			m := map[string]any{}
			for i := range g.r.IntN(4) {
				m[fmt.Sprint("p", g.r.IntN(5))+[]string{"", "", "x"}[i%3]] = g.value(depth + 1)
			}
			return m
		}
	case 7, 8:
		if depth < 4 {
			var l []any
			for range g.r.IntN(3) {
				l = append(l, g.value(depth+1))
			}
			return l
		}
	}
	return "a"
}

// TestQuickSchemaAgrees: on schemas in the quick subset, the quick check
// accepts exactly the arguments jsonschema-go accepts (it must never
// accept one that jsonschema-go rejects; accepting the same ones shows
// it is used). Arguments go through JSON as a call's do.
func TestQuickSchemaAgrees(t *testing.T) {
	g := quickGen{rand.New(rand.NewPCG(5, 6))}
	valid, checked := 0, 0
	for range rounds(3000, 100) {
		sb, _ := json.Marshal(g.schema(0))
		q := compileQuick(string(sb))
		if q == nil {
			t.Fatalf("schema in the subset not compiled: %s", sb)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(sb, &s); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", sb, err)
		}
		for range 10 {
			vb, _ := json.Marshal(g.value(0))
			var v any
			if err := json.Unmarshal(vb, &v); err != nil {
				t.Fatal(err)
			}
			want := rs.Validate(v) == nil
			if got := q.accepts(v); got != want {
				t.Fatalf("schema %s, value %s: quick accepts=%v, jsonschema-go accepts=%v", sb, vb, got, want)
			}
			checked++
			if want {
				valid++
			}
		}
	}
	if valid < checked/10 || valid > checked*9/10 {
		t.Fatalf("%d of %d values valid: the generator no longer tests both verdicts", valid, checked)
	}
}

// TestQuickSchemaSubset: a schema with any keyword outside the subset, at
// any depth, has no quick form; a real server's schemas do; and where the
// quick check declines (numbers in an enum), ValidateArgs still gives
// jsonschema-go's verdict.
func TestQuickSchemaSubset(t *testing.T) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}}`,
		`{"type":"object","properties":{"a":{"type":"number","multipleOf":2}}}`,
		`{"type":"string","minLength":1.5}`,
		`{"type":"string","maxLength":-1}`,
		`{"type":"number","minimum":"1"}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{}}}`,
		`{"type":"object","patternProperties":{"^x":{}}}`,
		`{"type":"object","items":[{"type":"string"}]}`,
		`{"type":"any"}`,
		`{"type":[]}`,
		`{"anyOf":[{"type":"string"}]}`,
		`{"type":"object","required":"a"}`,
		`[]`,
	} {
		if q := compileQuick(s); q != nil {
			t.Errorf("%s: compiled to a quick form", s)
		}
	}
	// Input schemas of server-everything 2026.8.31 (the interop peer), as
	// its tools/list gives them: each has a quick form.
	for _, s := range []string{
		`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"message":{"description":"Message to echo","type":"string"}},"required":["message"],"type":"object"}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"count":{"default":3,"description":"Number of resource links to return (1-10)","maximum":10,"minimum":1,"type":"number"}},"type":"object"}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"resourceId":{"default":1,"description":"ID of the text resource to fetch","type":"number"},"resourceType":{"default":"Text","enum":["Text","Blob"],"type":"string"}},"type":"object"}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"ambiguous":{"default":false,"description":"Simulate an ambiguous query that requires clarification (triggers input_required status)","type":"boolean"},"topic":{"description":"The research topic to investigate","type":"string"}},"required":["topic"],"type":"object"}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{},"type":"object"}`,
	} {
		if compileQuick(s) == nil {
			t.Errorf("no quick form for %s", s)
		}
	}
	schema := `{"type":"object","properties":{"n":{"enum":[1,"one"]},"i":{"type":"integer"}},"additionalProperties":false}`
	if compileQuick(schema) == nil {
		t.Fatal("enum of mixed values is in the subset")
	}
	for args, ok := range map[string]bool{
		`{"n":1}`: true, `{"n":1.0}`: true, `{"n":"one"}`: true, `{"n":2}`: false, `{"n":"two"}`: false,
		`{"i":3.0}`: true, `{"i":3.5}`: false, `{"x":1}`: false, `{}`: true,
	} {
		err := ValidateArgs("t", schema, []byte(args))
		if (err == nil) != ok {
			t.Errorf("%s: err = %v, want valid=%v", args, err, ok)
		}
	}
}

// FuzzQuickSchema: for any schema the quick check compiles and any
// arguments, it never accepts what jsonschema-go rejects.
func FuzzQuickSchema(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"type":"integer","minimum":1}},"required":["a"]}`, `{"a":1}`)
	f.Add(`{"type":"array","items":{"type":"string","maxLength":2},"maxItems":1}`, `["éé"]`)
	f.Add(`{"properties":{"e":{"enum":["x",1]}},"additionalProperties":{"type":"null"}}`, `{"e":"x","z":null}`)
	f.Add(`{"type":["number","null"],"exclusiveMaximum":2}`, `1.999`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		q := compileQuick(schema)
		if q == nil {
			return
		}
		var s jsonschema.Schema
		if json.Unmarshal([]byte(schema), &s) != nil {
			return // ValidateArgs does not validate against it at all
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal([]byte(args), &v) != nil {
			return
		}
		if q.accepts(v) {
			if err := rs.Validate(v); err != nil {
				t.Fatalf("schema %s, arguments %s: quick check accepts, jsonschema-go: %v", schema, args, err)
			}
		}
	})
}

// TestQuickSchemaBounds: each bound of the quick check at its limit and
// one step past it, as jsonschema-go decides: minimum and maximum are
// inclusive, the exclusive ones not, lengths count characters, and an
// absent bound bounds nothing.
func TestQuickSchemaBounds(t *testing.T) {
	for _, tc := range []struct {
		schema string
		values map[string]bool // argument JSON: valid
	}{
		{`{"minimum":1}`, map[string]bool{`1`: true, `0.5`: false}},
		{`{"maximum":1}`, map[string]bool{`1`: true, `1.5`: false}},
		{`{"exclusiveMinimum":1}`, map[string]bool{`1`: false, `1.5`: true}},
		{`{"exclusiveMaximum":1}`, map[string]bool{`1`: false, `0.5`: true}},
		{`{"minLength":2}`, map[string]bool{`"éé"`: true, `"é"`: false}},
		{`{"maxLength":2}`, map[string]bool{`"éé"`: true, `"ééé"`: false}},
		{`{"minItems":2}`, map[string]bool{`[1,2]`: true, `[1]`: false}},
		{`{"maxItems":2}`, map[string]bool{`[1,2]`: true, `[1,2,3]`: false}},
		{`{"maxLength":0,"maxItems":0}`, map[string]bool{`""`: true, `"a"`: false, `[]`: true, `[1]`: false}},
		{`{"type":["string","array"]}`, map[string]bool{`""`: true, `"a long string"`: true, `[]`: true, `[1,2,3]`: true, `1`: false}},
		{`{"type":"integer"}`, map[string]bool{`2`: true, `2.5`: false}},
	} {
		q := compileQuick(tc.schema)
		if q == nil {
			t.Fatalf("%s: no quick form", tc.schema)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal([]byte(tc.schema), &s); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		for arg, want := range tc.values {
			var v any
			if err := json.Unmarshal([]byte(arg), &v); err != nil {
				t.Fatal(err)
			}
			if got := q.accepts(v); got != want {
				t.Errorf("%s, %s: quick accepts=%v, want %v", tc.schema, arg, got, want)
			}
			if got := rs.Validate(v) == nil; got != want {
				t.Errorf("%s, %s: jsonschema-go accepts=%v, want %v", tc.schema, arg, got, want)
			}
		}
	}
	// Lengths are int32: a larger bound is left to jsonschema-go.
	for s, quick := range map[string]bool{`{"maxLength":2147483647}`: true, `{"maxLength":2147483648}`: false, `{"minItems":0}`: true} {
		if got := compileQuick(s) != nil; got != quick {
			t.Errorf("%s: quick form %v, want %v", s, got, quick)
		}
	}
}
