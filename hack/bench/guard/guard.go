// Package guard keeps a benchmark's headline figures honest across changes:
// a bench prints them as one summary line, the line last recorded lives in
// docs/benchmarks.md, and Compare says which figures moved by more than a
// threshold. Every figure is lower-is-better (a time, a count of writes,
// memory, CPU), so a rise is a regression.
package guard

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// prefix starts every summary line, so that one is found in a document.
const prefix = "bench "

// Line formats a summary: "bench <name>: key=value ...", keys in order.
func Line(name string, figures map[string]float64) string {
	keys := make([]string, 0, len(figures))
	for k := range figures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(prefix + name + ":")
	for _, k := range keys {
		b.WriteString(" " + k + "=" + strconv.FormatFloat(figures[k], 'g', 4, 64))
	}
	return b.String()
}

// Parse reads a summary line.
func Parse(line string) (name string, figures map[string]float64, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if !ok {
		return "", nil, fmt.Errorf("not a summary line: %q", line)
	}
	name, values, ok := strings.Cut(rest, ":")
	if !ok || name == "" {
		return "", nil, fmt.Errorf("summary line without a name: %q", line)
	}
	figures = map[string]float64{}
	for _, field := range strings.Fields(values) {
		k, v, ok := strings.Cut(field, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || k == "" || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "", nil, fmt.Errorf("summary %s: bad figure %q", name, field)
		}
		figures[k] = f
	}
	return name, figures, nil
}

// Recorded finds the summary of name in doc.
func Recorded(doc []byte, name string) (map[string]float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		if n, figures, err := Parse(sc.Text()); err == nil && n == name {
			return figures, true
		}
	}
	return nil, false
}

// Record replaces the summary of the same name in doc with line.
func Record(doc []byte, line string) ([]byte, error) {
	name, _, err := Parse(line)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(doc), "\n")
	for i, l := range lines {
		if n, _, err := Parse(l); err == nil && n == name {
			lines[i] = line + strings.Repeat("\n", strings.Count(l, "\n"))
			return []byte(strings.Join(lines, "")), nil
		}
	}
	return nil, fmt.Errorf("no summary %q recorded in the document: add the line once by hand where it belongs", name)
}

// Change is one figure compared with its recorded value.
type Change struct {
	Key         string
	Was, Now    float64
	Ratio       float64 // Now / Was
	Regressed   bool    // rose by more than the threshold
	Improved    bool    // fell by more than the threshold
	NotRecorded bool
}

func (c Change) String() string {
	switch {
	case c.NotRecorded:
		return fmt.Sprintf("%s: %.4g (not recorded before)", c.Key, c.Now)
	default:
		verdict := "within"
		if c.Regressed {
			verdict = "WORSE, beyond"
		} else if c.Improved {
			verdict = "better, beyond"
		}
		return fmt.Sprintf("%s: %.4g -> %.4g (%+.0f%%, %s the threshold)", c.Key, c.Was, c.Now, (c.Ratio-1)*100, verdict)
	}
}

// Compare compares now with recorded; threshold is a fraction (0.2: 20 %).
// A move smaller than floor is within, whatever its ratio: near zero a
// ratio means nothing (one write more in a resync of 1 000 that wrote one
// is +100 %).
func Compare(recorded, now map[string]float64, threshold, floor float64) []Change {
	keys := make([]string, 0, len(now))
	for k := range now {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	changes := make([]Change, 0, len(keys))
	for _, k := range keys {
		was, ok := recorded[k]
		c := Change{Key: k, Was: was, Now: now[k], NotRecorded: !ok}
		if ok {
			switch {
			case was == 0 && now[k] == 0:
				c.Ratio = 1
			case was == 0:
				c.Ratio = math.Inf(1)
			default:
				c.Ratio = now[k] / was
			}
			if math.Abs(now[k]-was) >= floor {
				c.Regressed = c.Ratio > 1+threshold
				c.Improved = c.Ratio < 1-threshold
			}
		}
		changes = append(changes, c)
	}
	return changes
}

// Check compares figures with the summary of name recorded in the document
// at path, printing each change to out, and fails when any rose by more than
// threshold; with record it writes figures into the document instead.
func Check(path, name string, figures map[string]float64, threshold, floor float64, record bool, out io.Writer) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if record {
		updated, err := Record(text, Line(name, figures))
		if err != nil {
			return err
		}
		return os.WriteFile(path, updated, 0o644)
	}
	recorded, ok := Recorded(text, name)
	if !ok {
		return fmt.Errorf("%s records no summary %q; run with -record once", path, name)
	}
	worse := 0
	for _, c := range Compare(recorded, figures, threshold, floor) {
		fmt.Fprintln(out, "  "+c.String())
		if c.Regressed {
			worse++
		}
	}
	if worse > 0 {
		return fmt.Errorf("%d figures worse by more than %.0f%% than recorded in %s", worse, threshold*100, path)
	}
	return nil
}
