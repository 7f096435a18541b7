package main

import (
	"io"
	"strings"
	"unicode/utf8"
)

// table is a text table whose column widths are measured from its
// content: every cell of a column padded to the widest one (header
// included), two spaces between columns, no trailing spaces.
type table struct {
	right []bool // right-aligned columns (numbers), by index
	rows  [][]string
}

// newTable starts a table with header; a column named in right is
// right-aligned.
func newTable(header []string, right ...string) *table {
	t := &table{right: make([]bool, len(header))}
	for i, h := range header {
		for _, r := range right {
			if h == r {
				t.right[i] = true
			}
		}
	}
	t.rows = append(t.rows, header)
	return t
}

// add appends a row of cells (as many as the header has).
func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write writes the table to w.
func (t *table) write(w io.Writer) error {
	width := make([]int, len(t.right))
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], visibleWidth(c))
		}
	}
	var sb strings.Builder
	for _, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-visibleWidth(c))
			if t.right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
			line.WriteString("  ")
		}
		sb.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// visibleWidth is how many columns s takes on screen: its runes, less
// its colour escapes.
func visibleWidth(s string) int {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = sgrRE.ReplaceAllString(s, "")
	}
	return utf8.RuneCountInString(s)
}
