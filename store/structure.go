package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"
	"os"
	"slices"
)

// ErrDamaged is returned by a writable [Open] of a journal whose page
// structure is damaged where a writer would write: a commit reads and
// rewrites those pages, so appending could lose or garble what is stored
// (see checkStructure). It wraps [ErrCorrupt]. Read-only opens do not
// check it: reads report the damage they meet, and `mcpledger salvage`
// copies what still reads.
var ErrDamaged error = damagedError{}

type damagedError struct{}

func (damagedError) Error() string { return "store: journal structure is damaged" }

// Is makes errors.Is(ErrDamaged, ErrCorrupt) hold.
func (damagedError) Is(target error) bool { return target == ErrCorrupt }

// checkStructure checks, before a writer opens the file, the pages its
// commits read and rewrite, without reading the whole history: every
// branch page of every top-level bucket (a commit walks branch pages to
// the leaf it changes, and rewrites the path), and the rightmost leaf of
// each (log/ grows only there). Of each page: its header (its own id,
// its flags, a count and overflow that fit), its elements inside it, its
// keys strictly ascending and inside the range its parent gives it; of
// each child: an id inside the pages meta m uses, neither free nor
// referenced twice. A bbolt tree is balanced, so the leftmost child of a
// branch tells whether its level holds branches or leaves; leaves are
// not read, except the rightmost. free is the freelist (freePages).
//
// The branch pages are a small fraction of the file (one per ~170 leaves
// of log/), so the check reads a few hundred pages of a million-event
// journal (BenchmarkCheckStructure).
func checkStructure(f *os.File, m boltMeta, free []uint64) error {
	c := &structChecker{f: f, m: m}
	for _, id := range free {
		c.mark(id)
	}
	return c.rootTree(m.root)
}

// rootTree checks the root bucket's page id and, when it is a branch (a
// file with more top-level buckets than fill a page), its children, and
// then the tree of each bucket its leaves hold. The root bucket's tree is
// small (a few bucket names): it is read whole.
func (c *structChecker) rootTree(id uint64) error {
	const what = "the root bucket"
	p, err := c.page(id, what)
	if err != nil {
		return err
	}
	if !c.mark(id) {
		return fmt.Errorf("page %d (%s) is free or used twice", id, what)
	}
	if p.flags == branchPageFlag {
		for i := range p.count {
			_, child := p.branchElem(i)
			if err := c.rootTree(child); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range p.count {
		flags, k, v := p.leafElem(i)
		if flags&bucketLeafFlag == 0 || len(v) < bucketHeader {
			continue
		}
		if root := binary.LittleEndian.Uint64(v); root != 0 { // 0: inline, checkRoot checked it
			if err := c.tree(string(k), root, binary.LittleEndian.Uint64(v[8:])); err != nil {
				return err
			}
		}
	}
	return nil
}

// structChecker carries one checkStructure: used has a bit per page,
// set for free pages and for each page a parent has pointed at.
type structChecker struct {
	f    *os.File
	m    boltMeta
	used big.Int
	// keyLen is the length of the keys of the bucket being checked (0:
	// any); maxKey, when not 0, bounds its 8-byte keys to 1..maxKey.
	keyLen int
	maxKey uint64
}

// mark sets page id's bit and reports whether it was clear. id must be
// below the high-water mark.
func (c *structChecker) mark(id uint64) bool {
	was := c.used.Bit(int(id)) == 1
	c.used.SetBit(&c.used, int(id), 1)
	return !was
}

// rawPage is one page read whole (with its overflow).
type rawPage struct {
	id    uint64
	flags uint16
	count int
	b     []byte
}

// page reads page id, checking its header; what names it in errors.
func (c *structChecker) page(id uint64, what string) (*rawPage, error) {
	if id < 2 || id >= c.m.pgid {
		return nil, fmt.Errorf("%s points at page %d, outside the file's pages 2 to %d", what, id, c.m.pgid-1)
	}
	ps := int64(c.m.pageSize)
	var hdr [pageHeader]byte
	if _, err := c.f.ReadAt(hdr[:], int64(id)*ps); err != nil {
		return nil, fmt.Errorf("reading page %d (%s): %v", id, what, err)
	}
	le := binary.LittleEndian
	p := &rawPage{id: id, flags: le.Uint16(hdr[8:]), count: int(le.Uint16(hdr[10:]))}
	overflow := uint64(le.Uint32(hdr[12:]))
	if le.Uint64(hdr[0:]) != id {
		return nil, fmt.Errorf("page %d (%s) says it is page %d", id, what, le.Uint64(hdr[0:]))
	}
	if p.flags != branchPageFlag && p.flags != leafPageFlag {
		return nil, fmt.Errorf("page %d (%s) has flags %#x, not a branch or leaf page's", id, what, p.flags)
	}
	if overflow >= c.m.pgid-id {
		return nil, fmt.Errorf("page %d (%s) overflows into %d more pages, past the file's %d", id, what, overflow, c.m.pgid)
	}
	p.b = make([]byte, (int64(overflow)+1)*ps)
	if _, err := c.f.ReadAt(p.b, int64(id)*ps); err != nil {
		return nil, fmt.Errorf("reading page %d (%s): %v", id, what, err)
	}
	if pageHeader+p.count*pageElemSize > len(p.b) {
		return nil, fmt.Errorf("page %d (%s) has %d elements, more than it holds", id, what, p.count)
	}
	for i := range p.count {
		if end := p.elemEnd(i); end > len(p.b) {
			return nil, fmt.Errorf("element %d of page %d (%s) ends %d bytes past the page", i, id, what, end-len(p.b))
		}
	}
	return p, nil
}

// elemEnd returns where element i's key (branch) or value (leaf) ends,
// as an offset in p.b. (Offsets and lengths are 32-bit: the sum cannot
// overflow an int.)
func (p *rawPage) elemEnd(i int) int {
	le := binary.LittleEndian
	at := pageHeader + i*pageElemSize
	e := p.b[at:]
	if p.flags == branchPageFlag {
		return at + int(le.Uint32(e[0:])) + int(le.Uint32(e[4:]))
	}
	return at + int(le.Uint32(e[4:])) + int(le.Uint32(e[8:])) + int(le.Uint32(e[12:]))
}

// branchElem returns branch element i's key and child page.
func (p *rawPage) branchElem(i int) (key []byte, child uint64) {
	le := binary.LittleEndian
	at := pageHeader + i*pageElemSize
	e := p.b[at:]
	pos, ksize := at+int(le.Uint32(e[0:])), int(le.Uint32(e[4:]))
	return p.b[pos : pos+ksize], le.Uint64(e[8:])
}

// leafElem returns leaf element i's flags, key and value.
func (p *rawPage) leafElem(i int) (flags uint32, key, value []byte) {
	le := binary.LittleEndian
	at := pageHeader + i*pageElemSize
	e := p.b[at:]
	pos, ksize, vsize := at+int(le.Uint32(e[4:])), int(le.Uint32(e[8:])), int(le.Uint32(e[12:]))
	return le.Uint32(e[0:]), p.b[pos : pos+ksize], p.b[pos+ksize : pos+ksize+vsize]
}

// key returns element i's key.
func (p *rawPage) key(i int) []byte {
	if p.flags == branchPageFlag {
		k, _ := p.branchElem(i)
		return k
	}
	_, k, _ := p.leafElem(i)
	return k
}

// keysIn checks that p's keys ascend strictly and lie below hi, and all
// but the first at or above lo (a nil bound is open). A seek for a key
// goes down the last branch element at or below it, so keys outside
// these bounds are keys no read finds. The first key is exempt from lo:
// no seek depends on it, and a branch's first key may be older than its
// child's first key.
func (c *structChecker) keysIn(p *rawPage, lo, hi []byte, what string) error {
	for i := range p.count {
		k := p.key(i)
		if c.keyLen != 0 && len(k) != c.keyLen {
			return fmt.Errorf("page %d (%s) has a key of %d bytes at element %d, not %d", p.id, what, len(k), i, c.keyLen)
		}
		if c.maxKey != 0 && (binary.BigEndian.Uint64(k) == 0 || binary.BigEndian.Uint64(k) > c.maxKey) {
			return fmt.Errorf("page %d (%s) holds key %d, outside the log's positions 1 to %d", p.id, what, binary.BigEndian.Uint64(k), c.maxKey)
		}
		if i > 0 && bytes.Compare(p.key(i-1), k) >= 0 {
			return fmt.Errorf("page %d (%s) has its keys out of order at element %d", p.id, what, i)
		}
		if i > 0 && lo != nil && bytes.Compare(k, lo) < 0 || hi != nil && bytes.Compare(k, hi) >= 0 {
			return fmt.Errorf("page %d (%s) holds key %x outside the range its parent gives it", p.id, what, k[:min(len(k), keyTextMax)])
		}
	}
	return nil
}

// childRef is a page a branch points at, with the key range it covers.
type childRef struct {
	id     uint64
	lo, hi []byte
}

// keyLens are the key lengths of the journal's buckets (layout.go).
var keyLens = map[string]int{
	string(bucketLog): 8, string(bucketSessions): 16, string(bucketIndex): indexKeyLen, string(bucketCheckpoints): 8,
}

// tree checks bucket name's tree from its root page; seq is the bucket's
// sequence. In log/, whose keys are the positions 1 to seq, every key
// must be one of them, and the rightmost leaf must end at seq: that is
// where the next commit appends.
func (c *structChecker) tree(name string, root, seq uint64) error {
	what := "bucket " + name
	c.keyLen = keyLens[name]
	c.maxKey = 0
	if name == string(bucketLog) {
		c.maxKey = seq
	}
	if _, err := c.page(root, what); err != nil {
		return err
	}
	if !c.mark(root) {
		return fmt.Errorf("%s's root page %d is free or used twice", what, root)
	}
	level := []childRef{{id: root}}
	for {
		first, err := c.page(level[0].id, what)
		if err != nil {
			return err
		}
		if first.flags == leafPageFlag { // a bucket of one leaf
			return c.lastLeaf(first, level[0], what)
		}
		// Whether the next level holds leaves: its leftmost page says
		// (bbolt's trees are balanced). Of leaves only the rightmost is
		// read. (An empty branch, which branch reports, has no leftmost:
		// this reads a stale element inside the page.)
		_, leftmost := first.branchElem(0)
		lp, err := c.page(leftmost, what)
		if err != nil {
			return err
		}
		leaves := lp.flags == leafPageFlag
		var next []childRef
		var last childRef
		for _, ref := range level {
			p, err := c.page(ref.id, what)
			if err != nil {
				return err
			}
			if next, err = c.branch(p, ref, what, next, leaves, &last); err != nil {
				return err
			}
		}
		if leaves {
			p, err := c.page(last.id, what)
			if err != nil {
				return err
			}
			return c.lastLeaf(p, last, what)
		}
		level = next
	}
}

// lastLeaf checks p, the rightmost leaf of a bucket, which ref points at:
// its keys, and in log/ that it ends at the log's sequence.
func (c *structChecker) lastLeaf(p *rawPage, ref childRef, what string) error {
	if p.flags != leafPageFlag {
		return fmt.Errorf("page %d (%s) is a branch among leaves", p.id, what)
	}
	if err := c.keysIn(p, ref.lo, ref.hi, what); err != nil {
		return err
	}
	if c.maxKey == 0 || p.count == 0 {
		return nil
	}
	if _, k, _ := p.leafElem(p.count - 1); binary.BigEndian.Uint64(k) != c.maxKey {
		return fmt.Errorf("the last page of %s (%d) ends at key %d, not at its sequence %d", what, p.id, binary.BigEndian.Uint64(k), c.maxKey)
	}
	return nil
}

// branch checks branch page p, which ref points at, and appends its
// children to next, or, when they are leaves, sets *last to each in turn.
func (c *structChecker) branch(p *rawPage, ref childRef, what string, next []childRef, leaves bool, last *childRef) ([]childRef, error) {
	if p.flags != branchPageFlag {
		return nil, fmt.Errorf("page %d (%s) is a leaf among branches", p.id, what)
	}
	if p.count == 0 {
		return nil, fmt.Errorf("branch page %d (%s) is empty", p.id, what)
	}
	if err := c.keysIn(p, ref.lo, ref.hi, what); err != nil {
		return nil, err
	}
	for i := range p.count {
		k, child := p.branchElem(i)
		if child < 2 || child >= c.m.pgid {
			return nil, fmt.Errorf("branch page %d (%s) points at page %d, outside the file's pages 2 to %d", p.id, what, child, c.m.pgid-1)
		}
		if !c.mark(child) {
			return nil, fmt.Errorf("branch page %d (%s) points at page %d, which is free or used twice", p.id, what, child)
		}
		lo, hi := ref.lo, ref.hi
		if i > 0 {
			lo = slices.Clip(k)
		}
		if i+1 < p.count {
			hi, _ = p.branchElem(i + 1)
		}
		if leaves {
			*last = childRef{id: child, lo: lo, hi: hi}
		} else {
			next = append(next, childRef{id: child, lo: lo, hi: hi})
		}
	}
	return next, nil
}
