package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// maxCallArgsBytes bounds the arguments of one call read from a file or
// standard input: the control socket takes requests of up to 16 MiB,
// and this leaves room for the rest of the request.
const maxCallArgsBytes = 15 << 20

// readCallArgs reads call's --args value: a JSON object given inline,
// @FILE (read from the file) or - (read from stdin), for arguments too
// large for a command line (the kernel refuses an argv of a few MB:
// "Argument list too long"). It returns the object's bytes as given and
// decoded. Each error says where the arguments came from and what to do.
func readCallArgs(v string, stdin io.Reader) (json.RawMessage, map[string]any, error) {
	from, b := "--args", []byte(v)
	switch {
	case v == "-":
		from = "--args - (standard input)"
		if stdin == nil {
			stdin = strings.NewReader("")
		}
		var err error
		if b, err = readBounded(stdin); err != nil {
			return nil, nil, fmt.Errorf("call: %s: %w", from, err)
		}
	case strings.HasPrefix(v, "@"):
		path := v[1:]
		from = "--args @" + path
		if path == "" {
			return nil, nil, usageErrorf("call: --args @: name the file after the @ (--args @args.json), or give - to read standard input")
		}
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, usageErrorf("call: %s: no such file: give the path of a file holding the arguments as one JSON object", from)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("call: %s: %w", from, err)
		}
		defer f.Close()
		if b, err = readBounded(f); err != nil {
			return nil, nil, fmt.Errorf("call: %s: %w", from, err)
		}
	}
	var a map[string]any
	if err := json.Unmarshal(b, &a); err != nil || a == nil {
		what := "not JSON"
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case len(bytes.TrimSpace(b)) == 0:
			what = "empty"
		case errors.As(err, &se):
			what = fmt.Sprintf("not JSON (%v, at byte %d)", se, se.Offset)
		case errors.As(err, &te), err == nil: // an array, a string, null...
			what = "JSON but not an object"
		}
		return nil, nil, usageErrorf(`call: %s is %s: the arguments must be one JSON object, as in {"path": "README.md"}`, from, what)
	}
	return json.RawMessage(b), a, nil
}

// readBounded reads r whole, refusing more than maxCallArgsBytes.
func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxCallArgsBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCallArgsBytes {
		return nil, fmt.Errorf("more than %d MiB of arguments: one call's arguments are limited to that; pass the server a path to the data instead of the data", maxCallArgsBytes>>20)
	}
	return b, nil
}
