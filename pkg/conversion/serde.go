package conversion

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// serdeWriter reads decoded JSON as upstream's Rust types read it and
// writes it as serde_json's compact serializer does. The first error
// sticks; path names the field it is in, for the error. A reader
// (discard) checks only and writes nothing: every conversion reads an
// object two or three times, so a check costs no output and no
// allocation. The types' fields are static tables of method expressions
// (below), not method values built per call, which would escape.
type serdeWriter struct {
	buf     []byte
	discard bool
	root    string // where path starts, for errors
	err     error
	path    []pathStep
	comma   []bool // per open object or array: whether a value was written
}

// pathStep is a field's key or, at index >= 0, a list item: the item's
// name is formatted only for an error.
type pathStep struct {
	key   string
	index int
}

// read is how a field's value is read (and written): a method expression
// of serdeWriter or one built from them once, at package initialisation.
type read func(w *serdeWriter, v any)

func (w *serdeWriter) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%s%s: %s", w.root, joinPath(w.path), fmt.Sprintf(format, args...))
	}
}

// joinPath names a field for an error; its keys may be a client's (a map's
// keys), so each is cut (echo).
func joinPath(path []pathStep) string {
	var out strings.Builder
	for i, p := range path {
		if p.index >= 0 {
			out.WriteString("[" + strconv.Itoa(p.index) + "]")
			continue
		}
		if i > 0 {
			out.WriteByte('.')
		}
		out.WriteString(echo(p.key))
	}
	return out.String()
}

// raw writes JSON text as it is.
func (w *serdeWriter) raw(s string) {
	if !w.discard {
		w.buf = append(w.buf, s...)
	}
}

func (w *serdeWriter) separate() {
	if n := len(w.comma); n > 0 {
		if w.comma[n-1] {
			w.raw(",")
		}
		w.comma[n-1] = true
	}
}

func (w *serdeWriter) beginObject() {
	w.separate()
	w.raw("{")
	w.comma = append(w.comma, false)
}

func (w *serdeWriter) endObject() {
	w.comma = w.comma[:len(w.comma)-1]
	w.raw("}")
}

// field writes a key; the value written next is not separated from it.
func (w *serdeWriter) field(key string) {
	w.separate()
	if !w.discard {
		w.buf = appendSerdeString(w.buf, key)
		w.buf = append(w.buf, ':')
	}
	w.comma = append(w.comma, false) // the value is the first "element" after the colon
	w.path = append(w.path, pathStep{key: key, index: -1})
}

func (w *serdeWriter) endField() {
	w.comma = w.comma[:len(w.comma)-1]
	w.path = w.path[:len(w.path)-1]
}

// nullField writes key: null, an Option that is None.
func (w *serdeWriter) nullField(key string) {
	w.field(key)
	w.separate()
	w.raw("null")
	w.endField()
}

// option writes an Option<T> field of a serde-derived struct: null when
// absent or null.
func (w *serdeWriter) option(obj map[string]any, key string, value read) {
	v := obj[key]
	if v == nil {
		w.nullField(key)
		return
	}
	w.field(key)
	value(w, v)
	w.endField()
}

// defaulted writes a #[serde(default)] field: its default when absent.
// Present as null it cannot be read (serde only defaults a missing field).
func (w *serdeWriter) defaulted(obj map[string]any, key string, def any, value read) {
	v, ok := obj[key]
	w.field(key)
	switch {
	case !ok:
		value(w, def)
	case v == nil:
		w.fail("null is not a value")
	default:
		value(w, v)
	}
	w.endField()
}

// cleared writes an Option field upstream sets to None before hashing:
// null, once the value has been read as upstream's type reads it (and its
// output dropped).
func (w *serdeWriter) cleared(obj map[string]any, key string, value read) {
	mark, top := len(w.buf), w.comma[len(w.comma)-1]
	w.option(obj, key, value)
	w.buf, w.comma[len(w.comma)-1] = w.buf[:mark], top
	w.nullField(key)
}

// requiredField reads a field serde requires: neither absent nor null.
func (w *serdeWriter) requiredField(obj map[string]any, key string, value read) {
	w.field(key)
	defer w.endField()
	if obj[key] == nil {
		w.fail("required")
		return
	}
	value(w, obj[key])
}

func (w *serdeWriter) requiredString(obj map[string]any, key string) {
	w.requiredField(obj, key, (*serdeWriter).string)
}

// structField is a field of a k8s-openapi or kopium struct.
type structField struct {
	key      string
	required bool
	value    read
}

// omitting writes the fields of a k8s-openapi or kopium struct, which skip
// absent ones; fields are given in the order the struct serializes them.
func (w *serdeWriter) omitting(v any, fields []structField) {
	obj, ok := v.(map[string]any)
	if !ok {
		w.fail("must be an object")
		return
	}
	w.beginObject()
	for _, f := range fields {
		val := obj[f.key]
		switch {
		case f.required && val == nil:
			// k8s-openapi reads a missing required string as "" and
			// always writes it.
			w.field(f.key)
			w.string("")
			w.endField()
		case val == nil:
		default:
			w.field(f.key)
			f.value(w, val)
			w.endField()
		}
	}
	w.endObject()
}

// structOf is the read of a struct with these fields.
func structOf(fields ...structField) read {
	return func(w *serdeWriter, v any) { w.omitting(v, fields) }
}

func (w *serdeWriter) string(v any) {
	s, ok := v.(string)
	if !ok {
		w.fail("must be a string")
		return
	}
	w.separate()
	if !w.discard {
		w.buf = appendSerdeString(w.buf, s)
	}
}

// quantity is k8s-openapi 0.27.0's Quantity: a string as written (not the
// canonical form Go's resource.Quantity would print), or an integer, which
// the CRD's int-or-string schema stores as a JSON number and k8s-openapi
// reads as its decimal digits; it refuses any other number.
func (w *serdeWriter) quantity(v any) {
	switch n := v.(type) {
	case string:
		w.string(n)
	case json.Number:
		// An integer, i64 or u64 as serde_json reads it, written as Rust
		// formats it ("-0" is 0); a fraction or an exponent is a float,
		// which Quantity refuses.
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			w.integerString(i)
		} else if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
			w.separate()
			if !w.discard {
				w.buf = append(strconv.AppendUint(append(w.buf, '"'), u, 10), '"')
			}
		} else {
			w.fail("a quantity number must be an integer")
		}
	case int64:
		w.integerString(n)
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			w.fail("a quantity number must be an integer")
			return
		}
		w.integerString(int64(n))
	default:
		w.fail("must be a quantity")
	}
}

// integerString writes n's digits as a JSON string.
func (w *serdeWriter) integerString(n int64) {
	w.separate()
	if !w.discard {
		w.buf = append(strconv.AppendInt(append(w.buf, '"'), n, 10), '"')
	}
}

// The unit variants of upstream's enums (serde names).
var (
	rolloutStrategy     = enumOf("WaitUntilReady", "ManuallyPromote", "ImmediatelyPromoteCausingDowntime")
	authenticatorKind   = enumOf("Frontegg", "Password", "Sasl", "Oidc", "None")
	privateKeyAlgorithm = enumOf("RSA", "ECDSA", "Ed25519")
)

// enumOf reads a serde-derived enum of unit variants: the variant's name,
// or serde's externally tagged form {"Name": null}; it writes the name.
func enumOf(variants ...string) read {
	return func(w *serdeWriter, v any) {
		name, ok := v.(string)
		if m, isMap := v.(map[string]any); isMap && len(m) == 1 {
			for k, inner := range m {
				name, ok = k, inner == nil
			}
		}
		if !ok || !slices.Contains(variants, name) {
			w.fail("must be one of %v", variants)
			return
		}
		w.string(name)
	}
}

func (w *serdeWriter) bool(v any) {
	b, ok := v.(bool)
	if !ok {
		w.fail("must be a boolean")
		return
	}
	w.separate()
	if !w.discard {
		w.buf = strconv.AppendBool(w.buf, b)
	}
}

func (w *serdeWriter) int64(v any) { w.integer(v, math.MinInt64, math.MaxInt64, "must be an integer") }

// int32 is an i32 as serde reads one: an integer in range, never a
// fraction or an exponent.
func (w *serdeWriter) int32(v any) {
	w.integer(v, math.MinInt32, math.MaxInt32, "must be a 32-bit integer")
}

func (w *serdeWriter) integer(v any, min, max int64, refusal string) {
	n, ok := integer(v, min, max)
	if !ok {
		w.fail("%s", refusal)
		return
	}
	w.separate()
	if !w.discard {
		w.buf = strconv.AppendInt(w.buf, n, 10)
	}
}

// integer reads v as serde_json reads an integer type: digits with an
// optional minus sign (serde_json reads "1.0" or "1e3" as a float, which no
// integer type accepts), within min..max.
func integer(v any, min, max int64) (int64, bool) {
	var n int64
	switch x := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, false
		}
		n = i
	case int64:
		n = x
	case int:
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		n = int64(x)
	default:
		return 0, false
	}
	return n, n >= min && n <= max
}

// uint64 is a u64 as serde_json reads one: a non-negative integer ("-0"
// is zero), never a fraction or an exponent.
func (w *serdeWriter) uint64(v any) {
	n, ok := v.(json.Number)
	if !ok {
		w.int64(v) // a value built in Go, not decoded: as i64
		return
	}
	s := string(n)
	if strings.HasPrefix(s, "-") {
		if i, err := strconv.ParseInt(s, 10, 64); err != nil || i != 0 {
			w.fail("must be a non-negative integer")
			return
		}
		s = "0"
	}
	if _, err := strconv.ParseUint(s, 10, 64); err != nil {
		w.fail("must be a non-negative integer")
		return
	}
	w.separate()
	w.raw(s)
}

// uuid is the uuid crate's: it reads the hyphenated, simple, braced and
// urn forms in either case and writes lower-case hyphenated.
func (w *serdeWriter) uuid(v any) {
	s, ok := v.(string)
	if !ok {
		w.fail("must be a UUID string")
		return
	}
	if w.discard && mzuuid.Valid(s) {
		w.separate()
		return
	}
	id, err := mzuuid.Canonical(s)
	if err != nil {
		w.fail("must be a UUID: %v", err)
		return
	}
	w.string(id)
}

// listOf reads a Vec of items read by item.
func listOf(item read) read {
	return func(w *serdeWriter, v any) {
		items, ok := v.([]any)
		if !ok {
			w.fail("must be a list")
			return
		}
		w.separate()
		w.raw("[")
		w.comma = append(w.comma, false)
		for i, it := range items {
			w.path = append(w.path, pathStep{index: i})
			item(w, it)
			w.path = w.path[:len(w.path)-1]
		}
		w.comma = w.comma[:len(w.comma)-1]
		w.raw("]")
	}
}

var strs = listOf((*serdeWriter).string)

// sortedMapOf is a BTreeMap<String, T>: keys in byte order, which is the
// order Go's sort gives strings. A reader does not sort: when several
// entries are wrong, which one its error names is not fixed.
func sortedMapOf(value read) read {
	return func(w *serdeWriter, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			w.fail("must be an object")
			return
		}
		w.beginObject()
		if w.discard {
			for k, val := range m {
				w.mapEntry(k, val, value)
			}
		} else {
			var small [8]string // a map's few keys, sorted without allocating
			keys := small[:0]
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				w.mapEntry(k, m[k], value)
			}
		}
		w.endObject()
	}
}

func (w *serdeWriter) mapEntry(key string, v any, value read) {
	w.field(key)
	if v == nil {
		w.fail("null is not a value")
	} else {
		value(w, v)
	}
	w.endField()
}

var stringMap = sortedMapOf((*serdeWriter).string)

// The k8s-openapi (feature v1_34) types the spec holds.
var (
	keySelector = structOf( // ConfigMapKeySelector and SecretKeySelector
		structField{"key", true, (*serdeWriter).string},
		structField{"name", true, (*serdeWriter).string},
		structField{"optional", false, (*serdeWriter).bool})
	objectFieldSelector = structOf(
		structField{"apiVersion", false, (*serdeWriter).string},
		structField{"fieldPath", true, (*serdeWriter).string})
	fileKeySelector = structOf(
		structField{"key", true, (*serdeWriter).string},
		structField{"optional", false, (*serdeWriter).bool},
		structField{"path", true, (*serdeWriter).string},
		structField{"volumeName", true, (*serdeWriter).string})
	resourceFieldSelector = structOf(
		structField{"containerName", false, (*serdeWriter).string},
		structField{"divisor", false, (*serdeWriter).quantity},
		structField{"resource", true, (*serdeWriter).string})
	envVarSource = structOf(
		structField{"configMapKeyRef", false, keySelector},
		structField{"fieldRef", false, objectFieldSelector},
		structField{"fileKeyRef", false, fileKeySelector},
		structField{"resourceFieldRef", false, resourceFieldSelector},
		structField{"secretKeyRef", false, keySelector})
	envVars = listOf(structOf(
		structField{"name", true, (*serdeWriter).string},
		structField{"value", false, (*serdeWriter).string},
		structField{"valueFrom", false, envVarSource}))
	resourceRequirements = structOf(
		structField{"claims", false, listOf(structOf( // ResourceClaim
			structField{"name", true, (*serdeWriter).string},
			structField{"request", false, (*serdeWriter).string}))},
		structField{"limits", false, sortedMapOf((*serdeWriter).quantity)},
		structField{"requests", false, sortedMapOf((*serdeWriter).quantity)})
	// kopium's CertificateSecretTemplate.
	secretTemplate = structOf(
		structField{"annotations", false, stringMap},
		structField{"labels", false, stringMap})
)

// certSpec is upstream's MaterializeCertSpec (serde-derived: absent Options
// are null, except the two key fields, which it skips when absent).
func (w *serdeWriter) certSpec(v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		w.fail("must be an object")
		return
	}
	w.beginObject()
	w.option(obj, "dnsNames", strs)
	w.option(obj, "duration", (*serdeWriter).string)
	w.option(obj, "renewBefore", (*serdeWriter).string)
	w.option(obj, "issuerRef", (*serdeWriter).issuerRef)
	w.option(obj, "secretTemplate", secretTemplate)
	w.skippedWhenAbsent(obj, "privateKeyAlgorithm", privateKeyAlgorithm)
	w.skippedWhenAbsent(obj, "privateKeySize", (*serdeWriter).int64)
	w.endObject()
}

// skippedWhenAbsent writes an Option field marked
// skip_serializing_if = "Option::is_none".
func (w *serdeWriter) skippedWhenAbsent(obj map[string]any, key string, value read) {
	if obj[key] != nil {
		w.field(key)
		value(w, obj[key])
		w.endField()
	}
}

// issuerRef is kopium's CertificateIssuerRef: name is required (serde
// refuses a missing one), group and kind are skipped when absent.
func (w *serdeWriter) issuerRef(v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		w.fail("must be an object")
		return
	}
	w.beginObject()
	w.skippedWhenAbsent(obj, "group", (*serdeWriter).string)
	w.skippedWhenAbsent(obj, "kind", (*serdeWriter).string)
	w.requiredString(obj, "name")
	w.endObject()
}

// appendSerdeString quotes s as serde_json does: only '"', '\\' and control
// characters are escaped (\b \t \n \f \r short, the rest as \u00xx in
// lower-case hex); everything else, '<', '&', U+2028 included, is written
// as is. Go's encoding/json escapes more, so it cannot be used here.
func appendSerdeString(buf []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		if len(s)-i >= 8 {
			if i = jsonvalue.SkipPlain(s, i); i == len(s) {
				break
			}
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		start = i + 1
		switch c {
		case '"':
			buf = append(buf, '\\', '"')
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\r':
			buf = append(buf, '\\', 'r')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
