package runtime

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcpledger/mcpledger/runtime/guard"
)

// ---- a tools/call response too large to hold, cut as it streams ----

// shrinker rewrites one JSON-RPC response as it streams, token by token,
// into a small valid one of the same structure: each string keeps a
// prefix (a text block's text up to keep characters, data and blob at a
// whole number of base64 quanta, any other string with a note of what it
// lost), and past a budget further content blocks, array items and object
// members are dropped. It never holds the message: what it keeps is
// bounded by its limits, whatever the server sends. It also counts what
// the whole result would have rendered to (guard.RenderResult's count)
// when that is exact: text blocks only.
//
// Feed it the message's bytes (without the newline) with write, then
// call finish. Input that is not one valid JSON object, a message that
// is not a response with a result, a key over maxKey bytes, a number over
// maxScalar bytes or nesting deeper than maxDepth is refused (errShrink):
// the caller falls back to discarding the message.
type shrinker struct {
	lim   shrinkLimits
	out   []byte
	stack []frame
	st    lexState
	size  int64 // bytes written to it

	// The token being read.
	str      strScan // a string
	scalar   []byte  // a number or literal
	literal  string  // the literal being matched
	key      []byte  // an object key, raw
	inKey    bool    // the string is a key
	val      valCtx  // where the value that starts next belongs
	reserved int     // bytes held back for the notes of open containers

	// What the message is.
	id        []byte // the id's JSON
	result    bool   // it has a result
	content   bool   // its result has a content array
	contentOK bool   // ... that is an array
	structure bool   // its result has structured content
	blocks    int64  // content blocks seen
	textChars int64  // characters of their texts
	exact     bool   // textChars is what RenderResult would count
	err       error
}

// shrinkLimits bound what a shrinker keeps.
type shrinkLimits struct {
	keep       int // characters kept of one string
	total      int // bytes after which no further content block or optional member starts
	structured int // bytes of the structured content
	meta       int // bytes of a _meta, annotations or unknown member
}

// shrinkLimitsFor derives the limits from a result bound (maxResultChars;
// <= 0: none): a text keeps at least guard.DefaultMaxResultChars
// characters and at most maxKeep, and structured content at most the
// bound in bytes, so that the guard's own bound (guard.BoundJSON) has
// nothing left to cut and the notes inside it stay those of the original.
func shrinkLimitsFor(maxResultChars int) shrinkLimits {
	k := min(max(maxResultChars, guard.DefaultMaxResultChars), maxKeep)
	s := maxResultChars
	if s <= 0 || s > k {
		s = k
	}
	return shrinkLimits{keep: k, total: 4 * k, structured: s, meta: 4 << 10}
}

// maxKeep bounds the characters a cut text keeps whatever the result
// bound, so that a cut message stays far below the message limit.
const maxKeep = 1 << 20

const (
	maxKey    = 1 << 10 // bytes of an object key
	maxScalar = 1 << 10 // bytes of a number
	maxDepth  = 256     // nesting
	noteRoom  = 80      // bytes the longest note takes, with its comma
)

var errShrink = errors.New("runtime: the response cannot be cut in transit")

// lexState is where the lexer is between tokens.
type lexState uint8

const (
	lexValue      lexState = iota // a value
	lexValueOrEnd                 // a value or ']'
	lexKeyOrEnd                   // a key or '}'
	lexKey                        // a key
	lexColon                      // ':'
	lexAfter                      // ',' or the container's end
	lexString                     // inside a string
	lexNumber
	lexLiteral
	lexDone // the message's object has ended
)

// role says what a container or string is in a CallToolResult response.
type role uint8

const (
	roleFree     role = iota // any JSON: cut with notes
	roleMessage              // the JSON-RPC message
	roleResult               // its result
	roleContent              // result.content
	roleBlock                // a content block
	roleResource             // a block's resource
	roleText                 // a text, cut at a character without a note
	roleType                 // a block's type
	roleBase64               // data or blob: cut at a base64 quantum
	roleID                   // the message's id
)

// valCtx is the place of the value about to start.
type valCtx struct {
	role role
	emit bool // it is written
	end  int  // out may grow to end within it
}

type frame struct {
	obj     bool
	role    role
	emit    bool
	end     int
	n, kept int    // values seen, written
	cutting bool   // one was dropped: the rest are
	seen    uint16 // known keys seen (protocol objects)
	// a content block's accounting
	typ   []byte // its type's JSON, up to 16 bytes
	chars int64  // its text's characters
}

func newShrinker(lim shrinkLimits) *shrinker {
	s := &shrinker{lim: lim, exact: true, out: make([]byte, 0, 4<<10)}
	s.val = valCtx{role: roleMessage, emit: true, end: lim.total}
	return s
}

// write feeds bytes of the message.
func (s *shrinker) write(b []byte) error {
	s.size += int64(len(b))
	for i := 0; i < len(b) && s.err == nil; {
		i += s.step(b[i:])
	}
	return s.err
}

func (s *shrinker) fail() int {
	if s.err == nil {
		s.err = errShrink
	}
	return 1 << 30
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// step consumes a token or a part of one from b and returns how many
// bytes it took (at least one).
func (s *shrinker) step(b []byte) int {
	c := b[0]
	switch s.st {
	case lexString:
		return s.stringBytes(b)
	case lexNumber:
		return s.numberBytes(b)
	case lexLiteral:
		return s.literalBytes(b)
	}
	if isSpace(c) {
		return 1
	}
	switch s.st {
	case lexDone:
		return s.fail()
	case lexValue, lexValueOrEnd:
		if c == ']' && s.st == lexValueOrEnd {
			s.close(false)
			return 1
		}
		if len(s.stack) > 0 && !s.top().obj {
			s.item()
		}
		return s.value(b)
	case lexKeyOrEnd, lexKey:
		if c == '}' && s.st == lexKeyOrEnd {
			s.close(true)
			return 1
		}
		if c != '"' {
			return s.fail()
		}
		s.inKey, s.key, s.st = true, s.key[:0], lexString
		s.str = strScan{}
		return 1
	case lexColon:
		if c != ':' {
			return s.fail()
		}
		s.st = lexValue
		return 1
	case lexAfter:
		f := s.top()
		switch {
		case c == ',':
			s.st = lexValue
			if f.obj {
				s.st = lexKey
			}
		case c == '}' && f.obj:
			s.close(true)
		case c == ']' && !f.obj:
			s.close(false)
		default:
			return s.fail()
		}
		return 1
	}
	return s.fail()
}

func (s *shrinker) top() *frame { return &s.stack[len(s.stack)-1] }

// emit appends b to the output when the current value is written.
func (s *shrinker) emit(b ...byte) {
	if s.val.emit {
		s.out = append(s.out, b...)
	}
}

// value starts the value at b[0], placed by s.val.
func (s *shrinker) value(b []byte) int {
	c := b[0]
	if len(s.stack) == 0 && c != '{' {
		return s.fail() // a message is an object
	}
	switch {
	case c == '{' || c == '[':
		if len(s.stack) >= maxDepth {
			return s.fail()
		}
		if s.val.role == roleBlock && c != '{' {
			s.exact = false
		}
		r := s.val.role
		if c == '[' && r != roleContent || c == '{' && r != roleMessage && r != roleResult && r != roleBlock && r != roleResource {
			r = roleFree
		}
		if s.val.role == roleContent && c == '[' {
			s.contentOK = true
		}
		if r == roleFree && s.val.emit {
			s.reserved += noteRoom
		}
		s.emit(c)
		s.stack = append(s.stack, frame{obj: c == '{', role: r, emit: s.val.emit, end: s.val.end})
		s.st = lexValueOrEnd
		if c == '{' {
			s.st = lexKeyOrEnd
		}
		return 1
	case c == '"':
		if s.val.role == roleBlock {
			s.exact = false // a content item that is not an object
		}
		s.inKey, s.st = false, lexString
		s.str = strScan{role: s.val.role}
		if s.str.role != roleText && s.str.role != roleBase64 && s.str.role != roleType && s.str.role != roleID {
			s.str.role = roleFree
		}
		s.emit('"')
		s.str.keeping, s.str.cutAt = s.val.emit, len(s.out)
		if s.val.role == roleID {
			s.id = append(s.id[:0], '"')
		}
		return 1
	case c == '-' || c >= '0' && c <= '9':
		if s.val.role == roleBlock {
			s.exact = false
		}
		s.st, s.scalar = lexNumber, s.scalar[:0]
		return s.numberBytes(b)
	case c == 't':
		s.literal = "true"
	case c == 'f':
		s.literal = "false"
	case c == 'n':
		s.literal = "null"
	default:
		return s.fail()
	}
	if s.val.role == roleBlock {
		s.exact = false
	}
	s.st, s.scalar = lexLiteral, s.scalar[:0]
	return s.literalBytes(b)
}

// item places the next item of the array on top of the stack.
func (s *shrinker) item() {
	f := s.top()
	f.n++
	v := valCtx{role: roleFree, end: f.end}
	if f.role == roleContent {
		v.role = roleBlock // written or dropped, it is counted
	}
	switch {
	case !f.emit || f.cutting:
	case f.role == roleContent:
		v.emit = len(s.out) < s.lim.total
	default:
		v.emit = len(s.out)+1+s.reserved+noteRoom <= f.end
	}
	if f.emit && !v.emit {
		f.cutting = true
	}
	if v.emit {
		if f.kept > 0 {
			s.out = append(s.out, ',')
		}
		f.kept++
	}
	s.val = v
}

// member places the value of the object member whose key was just read.
func (s *shrinker) member() {
	f := s.top()
	f.n++
	k := string(s.key)
	known, r, budget := knownKey(f.role, k)
	if known >= 0 && f.seen&(1<<known) != 0 {
		known = -1 // a duplicate: the decoder keeps the last, which may be dropped
		s.exact = false
	}
	switch {
	case budget < 0 && k == "structuredContent":
		budget = max(s.lim.structured-noteRoom, 0) // with its note, within the limit
	case budget < 0:
		budget = s.lim.keep
	}
	if known < 0 {
		r, budget = roleFree, s.lim.meta
		if f.role != roleFree {
			for _, c := range s.key {
				if c == '\\' {
					s.exact = false // it may spell a known key
				}
			}
		}
	} else {
		f.seen |= 1 << known
	}
	v := valCtx{role: r, end: f.end}
	switch {
	case !f.emit:
	case f.role != roleFree && known >= 0:
		v.emit = true // a known member of a protocol object is kept
	case f.cutting:
	default:
		v.emit = len(s.out)+len(s.key)+4+s.reserved+noteRoom <= f.end
	}
	if budget > 0 && f.role != roleFree {
		v.end = len(s.out) + len(s.key) + 4 + budget + noteRoom
		if known < 0 {
			v.end = min(v.end, f.end)
		}
	}
	if f.emit && !v.emit {
		f.cutting = true
	}
	if v.emit {
		if f.kept > 0 {
			s.out = append(s.out, ',')
		}
		s.out = append(append(append(s.out, '"'), s.key...), '"', ':')
		f.kept++
	}
	switch {
	case f.role == roleMessage && (k == "error" || k == "method"):
		s.fail() // not a result: today's answer
	case f.role == roleMessage && k == "result":
		s.result = true
	case f.role == roleResult && k == "content":
		s.content = true
	case f.role == roleResult && k == "structuredContent":
		s.structure = true
	}
	s.val = v
}

// knownKey returns the index of key among the members a protocol object
// keeps whatever the budget (-1: none), the role of its value, and the
// byte budget of a free value.
func knownKey(in role, key string) (int, role, int) {
	switch in {
	case roleMessage:
		switch key {
		case "jsonrpc":
			return 0, roleFree, 64
		case "id":
			return 1, roleID, 0
		case "result":
			return 2, roleResult, 0
		}
	case roleResult:
		switch key {
		case "content":
			return 0, roleContent, 0
		case "structuredContent":
			return 1, roleFree, -1 // set by the caller
		case "isError":
			return 2, roleFree, 64
		}
	case roleBlock:
		switch key {
		case "type":
			return 0, roleType, 0
		case "text":
			return 1, roleText, 0
		case "data":
			return 2, roleBase64, 0
		case "resource":
			return 3, roleResource, 0
		case "mimeType":
			return 4, roleFree, 1 << 10
		case "uri":
			return 5, roleFree, 8 << 10
		case "name":
			return 6, roleFree, 1 << 10
		}
	case roleResource:
		switch key {
		case "uri":
			return 0, roleFree, 8 << 10
		case "mimeType":
			return 1, roleFree, 1 << 10
		case "text":
			return 2, roleFree, -1
		case "blob":
			return 3, roleBase64, 0
		}
	}
	return -1, roleFree, 0
}

// close ends the container on top of the stack.
func (s *shrinker) close(obj bool) {
	f := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	if f.emit {
		if f.role == roleFree {
			s.reserved -= noteRoom
			if f.cutting {
				s.out = s.note(f)
			}
		}
		if obj {
			s.out = append(s.out, '}')
		} else {
			s.out = append(s.out, ']')
		}
	}
	if f.role == roleBlock {
		s.blocks++
		if string(f.typ) == `"text"` {
			s.textChars += f.chars
		} else {
			s.exact = false
		}
	}
	s.after()
}

// note appends what a free container lost, as guard.BoundJSON says it.
func (s *shrinker) note(f frame) []byte {
	b := s.out
	if f.kept > 0 {
		b = append(b, ',')
	}
	cut := strconv.Itoa(f.n-f.kept) + " of " + strconv.Itoa(f.n)
	if f.obj {
		return append(append(b, `"mcpledger_truncated":"`...), cut+` members cut"`...)
	}
	return append(append(b, `"[mcpledger: `...), cut+` items cut]"`...)
}

// after moves past a value that ended.
func (s *shrinker) after() {
	s.st = lexAfter
	if len(s.stack) == 0 {
		s.st = lexDone
		return
	}
	f := s.top()
	s.val = valCtx{emit: f.emit, end: f.end}
}

// finish returns the rewritten message, its id and what was cut.
func (s *shrinker) finish() ([]byte, jsonrpc.ID, guard.Transit, error) {
	if s.err != nil {
		return nil, jsonrpc.ID{}, guard.Transit{}, s.err
	}
	if s.st != lexDone || !s.result || len(s.id) == 0 {
		return nil, jsonrpc.ID{}, guard.Transit{}, errShrink
	}
	var v any
	if json.Unmarshal(s.id, &v) != nil {
		return nil, jsonrpc.ID{}, guard.Transit{}, errShrink
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return nil, jsonrpc.ID{}, guard.Transit{}, errShrink
	}
	t := guard.Transit{Bytes: s.size, Chars: -1}
	switch {
	case !s.content && !s.structure:
		t.Chars = 0
	case s.content && s.contentOK && s.exact && (s.blocks > 0 || !s.structure):
		t.Chars = s.textChars + max(s.blocks-1, 0)
	}
	return s.out, id, t, nil
}
