// Package markdown reads the fenced code blocks of the documentation, for
// the tests that run or render what a page shows (test/e2e, test/chart).
package markdown

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// Block is one fenced code block: its language (what follows the opening
// fence), the heading it follows (its text without the #s), the line its
// body starts on, and its body without the fence's indentation (a block in
// a list item is indented).
type Block struct {
	Lang, Heading string
	Line          int
	Body          string
}

// Blocks returns a page's fenced blocks in order.
func Blocks(page []byte) ([]Block, error) {
	var out []Block
	var cur *Block
	var body strings.Builder
	heading, indent := "", ""
	s := bufio.NewScanner(bytes.NewReader(page))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; s.Scan(); line++ {
		text := s.Text()
		trimmed := strings.TrimSpace(text)
		switch {
		case cur == nil && strings.HasPrefix(text, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(text, "#"))
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			indent = text[:len(text)-len(strings.TrimLeft(text, " "))]
			cur = &Block{Lang: strings.TrimPrefix(trimmed, "```"), Heading: heading, Line: line + 1}
			body.Reset()
		case cur != nil && trimmed == "```":
			cur.Body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(strings.TrimPrefix(text, indent) + "\n")
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("the block opened on line %d is not closed", cur.Line-1)
	}
	return out, s.Err()
}

// Lang returns the blocks of one language.
func Lang(blocks []Block, lang string) []Block {
	var out []Block
	for _, b := range blocks {
		if b.Lang == lang {
			out = append(out, b)
		}
	}
	return out
}
