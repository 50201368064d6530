package rustsrc

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// The lexer: enough of Rust's to skip comments and read literals correctly.
// Outer doc comments (/// and /** */) are what rustc makes of them, a
// #[doc = "..."] attribute: schemars reads them (it orders an enum's
// documented variants after the others); StripDocs drops them where
// documentation must not matter.

// Kind is a token's kind.
type Kind int

const (
	Ident Kind = iota
	Punct
	Str  // Text is the unescaped value
	Char // Text is the character
	Num
	Lifetime
)

// Token is one token of Rust source; Line is where it starts.
type Token struct {
	Kind Kind
	Text string
	Line int
}

// Is reports whether t is of kind with text.
func (t Token) Is(kind Kind, text string) bool { return t.Kind == kind && t.Text == text }

// IsPunct reports whether t is the punctuation s (one character).
func (t Token) IsPunct(s string) bool { return t.Is(Punct, s) }

// Lex splits Rust source into tokens, dropping comments except outer doc
// comments, which become #[doc = "..."] attributes. Multi-character
// punctuation is split into one token a character (`::` is two).
func Lex(src string) ([]Token, error) {
	var toks []Token
	r := []rune(src)
	line := 1
	i := 0
	peek := func(k int) rune {
		if i+k < len(r) {
			return r[i+k]
		}
		return 0
	}
	for i < len(r) {
		c := r[i]
		switch {
		case c == '\n':
			line++
			i++
		case unicode.IsSpace(c):
			i++
		case c == '/' && peek(1) == '/':
			start := i
			for i < len(r) && r[i] != '\n' {
				i++
			}
			// An outer doc comment (/// but not ////) is #[doc = "..."].
			if text := string(r[start:i]); strings.HasPrefix(text, "///") && !strings.HasPrefix(text, "////") {
				toks = append(toks, Token{Punct, "#", line}, Token{Punct, "[", line}, Token{Ident, "doc", line},
					Token{Punct, "=", line}, Token{Str, text[3:], line}, Token{Punct, "]", line})
			}
		case c == '/' && peek(1) == '*':
			start, startLine := i, line
			doc := peek(2) == '*' && peek(3) != '*' && peek(3) != '/'
			depth := 0
			for i < len(r) {
				if r[i] == '/' && peek(1) == '*' {
					depth++
					i += 2
				} else if r[i] == '*' && peek(1) == '/' {
					depth--
					i += 2
					if depth == 0 {
						break
					}
				} else {
					if r[i] == '\n' {
						line++
					}
					i++
				}
			}
			if depth != 0 {
				return nil, fmt.Errorf("line %d: unterminated block comment", line)
			}
			// An outer block doc comment (/** but not /*** or /**/) too.
			if doc {
				text := string(r[start+3 : i-2])
				toks = append(toks, Token{Punct, "#", startLine}, Token{Punct, "[", startLine}, Token{Ident, "doc", startLine},
					Token{Punct, "=", startLine}, Token{Str, text, startLine}, Token{Punct, "]", startLine})
			}
		case c == '"' || (c == 'b' && peek(1) == '"') || (c == 'c' && peek(1) == '"'):
			start := line
			if c != '"' {
				i++
			}
			i++
			var b strings.Builder
			for {
				if i >= len(r) {
					return nil, fmt.Errorf("line %d: unterminated string", start)
				}
				if r[i] == '"' {
					i++
					break
				}
				if r[i] == '\\' {
					s, n, err := unescape(r[i:])
					if err != nil {
						return nil, fmt.Errorf("line %d: %v", line, err)
					}
					for _, x := range r[i : i+n] {
						if x == '\n' {
							line++
						}
					}
					b.WriteString(s)
					i += n
					continue
				}
				if r[i] == '\n' {
					line++
				}
				b.WriteRune(r[i])
				i++
			}
			toks = append(toks, Token{Str, b.String(), start})
		case (c == 'r' || (c == 'b' && peek(1) == 'r')) && rawStringStart(r, i) > 0:
			// r"..", r#".."#, br"..": no escapes.
			j := i + rawStringStart(r, i)
			hashes := 0
			for r[j] == '#' {
				hashes++
				j++
			}
			j++ // the opening quote
			closing := "\"" + strings.Repeat("#", hashes)
			end := strings.Index(string(r[j:]), closing)
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated raw string", line)
			}
			body := []rune(string(r[j:])[:end])
			toks = append(toks, Token{Str, string(body), line})
			line += strings.Count(string(body), "\n")
			i = j + len(body) + len([]rune(closing))
		case c == '\'':
			// A char literal ('x', '\n', '\u{..}') or a lifetime/label.
			if peek(1) == '\\' {
				s, n, err := unescape(r[i+1:])
				if err != nil {
					return nil, fmt.Errorf("line %d: %v", line, err)
				}
				if peek(1+n) != '\'' {
					return nil, fmt.Errorf("line %d: bad char literal", line)
				}
				toks = append(toks, Token{Char, s, line})
				i += n + 2
			} else if peek(2) == '\'' {
				toks = append(toks, Token{Char, string(peek(1)), line})
				i += 3
			} else {
				j := i + 1
				for j < len(r) && isIdentRune(r[j]) {
					j++
				}
				toks = append(toks, Token{Lifetime, string(r[i:j]), line})
				i = j
			}
		case c == '_' || unicode.IsLetter(c):
			j := i
			if c == 'r' && peek(1) == '#' && i+2 < len(r) && isIdentStart(r[i+2]) {
				j = i + 2 // raw identifier r#name
				i = j
			}
			for j < len(r) && isIdentRune(r[j]) {
				j++
			}
			toks = append(toks, Token{Ident, string(r[i:j]), line})
			i = j
		case unicode.IsDigit(c):
			j := i
			for j < len(r) && (isIdentRune(r[j]) || (r[j] == '.' && j+1 < len(r) && unicode.IsDigit(r[j+1]))) {
				j++
			}
			toks = append(toks, Token{Num, string(r[i:j]), line})
			i = j
		default:
			toks = append(toks, Token{Punct, string(c), line})
			i++
		}
	}
	return toks, nil
}

// rawStringStart returns the length of the prefix ("r" or "br") of a raw
// string starting at i, or 0 if there is none.
func rawStringStart(r []rune, i int) int {
	j := i
	if r[j] == 'b' {
		j++
	}
	if j >= len(r) || r[j] != 'r' {
		return 0
	}
	j++
	k := j
	for k < len(r) && r[k] == '#' {
		k++
	}
	if k < len(r) && r[k] == '"' {
		return j - i
	}
	return 0
}

func isIdentStart(c rune) bool { return c == '_' || unicode.IsLetter(c) }
func isIdentRune(c rune) bool  { return c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c) }

// unescape decodes the escape at the start of r (r[0] == '\\').
func unescape(r []rune) (string, int, error) {
	if len(r) < 2 {
		return "", 0, fmt.Errorf("bad escape")
	}
	switch r[1] {
	case 'n':
		return "\n", 2, nil
	case 't':
		return "\t", 2, nil
	case 'r':
		return "\r", 2, nil
	case '0':
		return "\x00", 2, nil
	case '\\', '\'', '"':
		return string(r[1]), 2, nil
	case 'x':
		if len(r) < 4 {
			return "", 0, fmt.Errorf("bad \\x escape")
		}
		v, err := strconv.ParseUint(string(r[2:4]), 16, 8)
		return string(rune(v)), 4, err
	case 'u':
		end := strings.IndexRune(string(r), '}')
		if len(r) < 4 || r[2] != '{' || end < 0 {
			return "", 0, fmt.Errorf("bad \\u escape")
		}
		body := []rune(string(r)[:end])
		v, err := strconv.ParseUint(string(body[3:]), 16, 32)
		return string(rune(v)), len(body) + 1, err
	case '\n':
		// Line continuation: skip the newline and leading whitespace.
		n := 1
		for n < len(r) && unicode.IsSpace(r[n]) {
			n++
		}
		return "", n, nil
	}
	return "", 0, fmt.Errorf("unknown escape \\%c", r[1])
}

// Render prints tokens back as compact Rust.
func Render(toks []Token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			prev := toks[i-1]
			word := func(k Kind) bool { return k == Ident || k == Num || k == Lifetime }
			// Spaces between words, after commas and around a `key = value`
			// equals sign (not in `..=`).
			eqBefore := t.IsPunct("=") && prev.Kind != Punct
			eqAfter := prev.IsPunct("=") && i >= 2 && toks[i-2].Kind != Punct
			if word(prev.Kind) && word(t.Kind) || prev.IsPunct(",") || eqBefore || eqAfter {
				b.WriteByte(' ')
			}
		}
		switch t.Kind {
		case Str:
			b.WriteString(strconv.Quote(t.Text))
		case Char:
			b.WriteString("'" + strings.Trim(strconv.QuoteRune([]rune(t.Text)[0]), "'") + "'")
		default:
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// StripDocs returns toks without #[doc = "..."] attributes (doc comments
// included), for comparing code whatever its documentation says.
func StripDocs(toks []Token) []Token {
	var out []Token
	for i := 0; i < len(toks); i++ {
		if i+5 < len(toks) && toks[i].IsPunct("#") && toks[i+1].IsPunct("[") && toks[i+2].Is(Ident, "doc") &&
			toks[i+3].IsPunct("=") && toks[i+4].Kind == Str && toks[i+5].IsPunct("]") {
			i += 5
			continue
		}
		out = append(out, toks[i])
	}
	return out
}
