package tracing

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strings"
)

// headerList is --opentelemetry-header: a string slice as pflag's
// StringSlice (commas separate, quotes as in CSV; the first value given
// replaces the default, later ones add), except that a value that is not
// such a list is counted, for Start to report, instead of refused by pflag,
// whose error quotes the value: a header may be a collector's credential.
type headerList struct {
	values    *[]string
	malformed *int
	set       bool
}

func (h *headerList) Set(value string) error {
	var fields []string
	if value != "" {
		r := csv.NewReader(strings.NewReader(value))
		var err error
		if fields, err = r.Read(); err != nil {
			*h.malformed++
			return nil
		}
		// One line: a second (a Secret's value with a newline) would be
		// dropped without a word.
		if _, err := r.Read(); err != io.EOF {
			*h.malformed++
			return nil
		}
	}
	if !h.set {
		*h.values, h.set = nil, true
	}
	*h.values = append(*h.values, fields...)
	return nil
}

func (h *headerList) Type() string { return "strings" }

// Append, Replace and GetSlice make it a pflag.SliceValue, as StringSlice
// is: the values are read back through GetSlice, not String.
func (h *headerList) Append(value string) error {
	*h.values = append(*h.values, value)
	return nil
}

func (h *headerList) Replace(values []string) error {
	*h.values = slices.Clone(values)
	return nil
}

func (h *headerList) GetSlice() []string { return slices.Clone(*h.values) }

// String shows how many headers there are, not what they hold.
func (h *headerList) String() string {
	if len(*h.values) == 0 {
		return "" // no "(default [])" in --help
	}
	return fmt.Sprintf("[%d headers]", len(*h.values))
}
