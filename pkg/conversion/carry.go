package conversion

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
)

// Annotations under AnnotationPrefix carry what one version cannot express
// so that a round trip through the other version restores it.
const (
	AnnotationPrefix = "conversion.materialize.cloud/"
	// v1alpha1CarryAnnotation rides on v1 objects: v1alpha1 values v1 lacks.
	v1alpha1CarryAnnotation = AnnotationPrefix + "v1alpha1"
	// v1CarryAnnotation rides on v1alpha1 objects: v1 values v1alpha1 lacks.
	v1CarryAnnotation = AnnotationPrefix + "v1"
)

// carried is one field the target version cannot express. Value is what the
// source held (nil: absent); Derived is what converting back would produce
// without help. On the way back Value is restored only while the field still
// holds Derived, so a change made through the other version is never undone
// by a stale annotation.
type carried struct {
	Path    []string        `json:"path"`
	Value   json.RawMessage `json:"value,omitempty"`
	Derived json.RawMessage `json:"derived,omitempty"`
}

// fieldPaths is a trie of field paths: below leads to the fields under a
// field; whole marks a field compared (and replaced) as a whole, which a
// carried path may make of a field that also has touched fields below.
// path is the field's own path from the root, shared (read only) by every
// carried entry found there, so a diff allocates no path of its own.
type fieldPaths struct {
	whole bool
	path  []string
	below []*fieldPaths // a handful: a slice scans faster than a map
}

func (p *fieldPaths) key() string { return p.path[len(p.path)-1] }

func (p *fieldPaths) add(path []string) {
	node := p
	for i, k := range path {
		var next *fieldPaths
		for _, sub := range node.below {
			if sub.key() == k {
				next = sub
				break
			}
		}
		if next == nil {
			// Clipped: carried entries share it, and an append must copy.
			next = &fieldPaths{path: slices.Clip(slices.Clone(path[:i+1]))}
			node.below = append(node.below, next)
		}
		node = next
	}
	node.whole = true
}

func (p *fieldPaths) clone() *fieldPaths {
	out := &fieldPaths{whole: p.whole, path: p.path}
	for _, sub := range p.below {
		out.below = append(out.below, sub.clone())
	}
	return out
}

func newFieldPaths(paths ...[]string) *fieldPaths {
	p := &fieldPaths{}
	for _, path := range paths {
		p.add(path)
	}
	return p
}

// convertedFields are the fields plainToV1 and plainToV1alpha1 set or
// delete (written), and the JSON type a carry annotation may restore in
// each (carried; "" for apiVersion, which is never carried). A carry may
// also restore serviceAccountAnnotations whole: the role moves into a map
// that did not exist.
var convertedFields = []struct {
	path    []string
	written bool
	carried string
}{
	{[]string{"apiVersion"}, true, ""},
	{[]string{"spec", "requestRollout"}, true, "string"},
	{[]string{"spec", "inPlaceRollout"}, true, "bool"},
	{[]string{"spec", "environmentdIamRoleArn"}, true, "string"},
	{[]string{"spec", "serviceAccountAnnotations"}, false, "string map"},
	{[]string{"spec", "serviceAccountAnnotations", IAMRoleAnnotation}, true, "string"},
	{[]string{"spec", "forcePromote"}, true, "string"},
	{[]string{"status", "lastCompletedRolloutRequest"}, true, "string"},
	{[]string{"status", "resourcesHash"}, true, "string"},
	{[]string{"status", "observedGeneration"}, true, "integer"},
	{[]string{"status", "requestedRolloutHash"}, true, "string"},
	{[]string{"status", "lastCompletedRolloutHash"}, true, "string"},
}

// writtenByPlain are the written convertedFields: all a plain conversion's
// copy needs of its own (copyPaths).
var writtenByPlain = func() [][]string {
	var out [][]string
	for _, f := range convertedFields {
		if f.written {
			out = append(out, f.path)
		}
	}
	return out
}()

var (
	// changedByConversion is what a conversion may change: the plain
	// writes and the carry annotations.
	changedByConversion = newFieldPaths(append(slices.Clone(writtenByPlain),
		[]string{"metadata", "annotations", v1CarryAnnotation},
		[]string{"metadata", "annotations", v1alpha1CarryAnnotation})...)
)

// touched is every field a conversion carrying restored may change: the
// fixed ones and the carried paths, which restore sets or removes.
func touched(restored []carried) *fieldPaths {
	if len(restored) == 0 {
		return changedByConversion
	}
	p := changedByConversion.clone()
	for _, f := range restored {
		if len(f.Path) > 0 {
			p.add(f.Path)
		}
	}
	return p
}

// copyPaths copies obj and every object on the way to a field in paths,
// sharing everything else: the copy may have those fields set, deleted or
// replaced (never modified in place) without touching obj.
func copyPaths(obj map[string]any, paths *fieldPaths) map[string]any {
	out := maps.Clone(obj)
	for _, sub := range paths.below {
		if len(sub.below) == 0 {
			continue
		}
		if m, ok := out[sub.key()].(map[string]any); ok {
			out[sub.key()] = copyPaths(m, sub)
		}
	}
	return out
}

// wayBackFields are where a plain conversion may write: writtenByPlain,
// and spec.serviceAccountAnnotations, which plainToV1 creates for the role
// when there is none. Listed parents first: they are put back last.
var wayBackFields = append([][]string{{"spec", "serviceAccountAnnotations"}}, writtenByPlain...)

// savedField is a field's value before the way back, in its parent.
type savedField struct {
	parent  map[string]any
	key     string
	value   any
	present bool
}

// carryWayBack puts in out's annotation key what the plain way back
// (plainBack) would not reproduce of the original, whose fields at changed
// d holds (snapshot). The way back runs on out itself, which is then put
// back as it was, so it costs no copy of out's maps. d is recycled.
// leftOut says why a carry was not written (see putCarry).
func carryWayBack(out map[string]any, key string, changed *fieldPaths, d *differ, plainBack func(map[string]any)) (leftOut string) {
	var buf [16]savedField
	saved := buf[:0]
	for _, path := range wayBackFields {
		parent, ok := out, true
		if len(path) > 1 {
			parent, ok = lookupMap(out, path[:len(path)-1]...)
		}
		if ok {
			key := path[len(path)-1]
			v, present := parent[key]
			saved = append(saved, savedField{parent, key, v, present})
		}
	}
	plainBack(out)
	d.at(changed, 0, out)
	for i := len(saved) - 1; i >= 0; i-- {
		if f := saved[i]; f.present {
			f.parent[f.key] = f.value
		} else {
			delete(f.parent, f.key)
		}
	}
	sortCarried(d.out)
	leftOut = putCarry(out, key, d.out, d.overflow)
	d.recycle()
	return leftOut
}

// differ collects carried fields. Their values are encoded into one
// buffer, each entry a full slice of it that later appends never touch.
// want is what the original held at each node of the fields compared, in
// the trie's pre-order (snapshot).
type differ struct {
	want []wantValue
	out  []carried
	raw  []byte
	// size bounds the carry's length so far; overflow: it would exceed
	// maxCarryBytes, and is left out.
	size     int
	overflow bool
}

type wantValue struct {
	value   any
	present bool
}

// differs are reused: every conversion diffs, and what it collects is
// garbage once the annotation is written (encodeCarry copies it).
var differs = sync.Pool{New: func() any { return &differ{} }}

func (d *differ) recycle() {
	// An outsized diff (a carried map of a tenant's annotations) is not
	// kept for the next.
	if cap(d.raw) > 16<<10 || cap(d.out) > 64 || cap(d.want) > 64 {
		return
	}
	clear(d.out)
	clear(d.want) // values of a request, not kept past it
	d.want, d.out, d.raw = d.want[:0], d.out[:0], d.raw[:0]
	d.size, d.overflow = 0, false
	differs.Put(d)
}

// snapshot records what obj holds at every node of paths, in pre-order:
// all that the diff reads of the original. A converted object may then
// share obj's maps and change them in place before the diff, as long as
// the diff goes down into every map changed: one it compares whole, or
// writes into the carry because the result holds no map there, is read as
// it is then, not as it was.
func (d *differ) snapshot(obj map[string]any, paths *fieldPaths) {
	for _, sub := range paths.below {
		v, ok := obj[sub.key()]
		d.want = append(d.want, wantValue{v, ok})
		m, _ := v.(map[string]any) // none below a value that is not an object
		d.snapshot(m, sub)
	}
}

// at diffs got against the original's snapshot from d.want[i] on, over
// the nodes of paths, and returns the index after them.
func (d *differ) at(paths *fieldPaths, i int, got map[string]any) int {
	for _, sub := range paths.below {
		w := d.want[i]
		i++
		g, gok := got[sub.key()]
		wm, wIsMap := w.value.(map[string]any)
		gm, gIsMap := g.(map[string]any)
		switch {
		case w.present && gok && wIsMap && gIsMap && !sub.whole:
			i = d.at(sub, i, gm)
			continue
		case w.present && gok && wIsMap && gIsMap:
			d.into(sub.path, wm, gm)
		case w.present != gok || !sameValue(w.value, g):
			d.add(sub.path, w.value, w.present, g, gok)
		}
		i += sub.nodes()
	}
	return i
}

// nodes counts the nodes below p.
func (p *fieldPaths) nodes() int {
	n := len(p.below)
	for _, sub := range p.below {
		n += sub.nodes()
	}
	return n
}

// into diffs two maps compared whole, key by key, one level deep: the only
// such field is a map of strings (serviceAccountAnnotations), and a deeper
// value, which no schema admits, is compared and carried as one value, so
// neither the work nor the paths allocated grow with a hostile nesting.
func (d *differ) into(path []string, want, got map[string]any) {
	for k, w := range want {
		if g, gok := got[k]; !gok || !sameValue(w, g) {
			d.add(childPath(path, k), w, true, g, gok)
		}
	}
	for k, g := range got {
		if _, wok := want[k]; !wok {
			d.add(childPath(path, k), nil, false, g, true)
		}
	}
}

// childPath is path and k, in a slice of its own.
func childPath(path []string, k string) []string {
	return append(slices.Clip(path), k)
}

// add carries a field, unless the carry has outgrown maxCarryBytes
// (counted before anything is encoded, which escaping may make six times
// a value's size), which then is not written at all.
func (d *differ) add(path []string, want any, wok bool, got any, gok bool) {
	if d.overflow || alwaysDerived(carried{Path: path}) {
		return // putCarry drops what is always derived
	}
	d.size += 32 // encodeCarry's framing of an entry
	for _, k := range path {
		d.size += jsonvalue.StringLen(k) + 1
	}
	if d.size += encodedBound(want, maxCarryBytes-d.size) + encodedBound(got, maxCarryBytes-d.size); d.size > maxCarryBytes {
		d.overflow = true
		return
	}
	d.out = append(d.out, carried{Path: path, Value: d.encode(want, wok), Derived: d.encode(got, gok)})
}

// encodedBound is at least the length of v's JSON, or more than limit: the
// count stops there, so sizing a hostile value costs no more than that.
func encodedBound(v any, limit int) int {
	switch v := v.(type) {
	case string:
		return jsonvalue.StringLen(v)
	case json.Number:
		return len(v)
	case map[string]any:
		n := 2
		for k, e := range v {
			if n += jsonvalue.StringLen(k) + 2; n > limit {
				return n
			}
			if n += encodedBound(e, limit-n); n > limit {
				return n
			}
		}
		return n
	case []any:
		n := 2
		for _, e := range v {
			if n += encodedBound(e, limit-n) + 1; n > limit {
				return n
			}
		}
		return n
	}
	return 5 // null, true, false
}

func (d *differ) encode(v any, present bool) json.RawMessage {
	if !present {
		return nil
	}
	start := len(d.raw)
	d.raw = appendValue(d.raw, v)
	return d.raw[start:len(d.raw):len(d.raw)]
}

// sameValue is reflect.DeepEqual, without reflection for the scalars that
// nearly every carried field holds.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case string:
		b, ok := b.(string)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case nil:
		return b == nil
	}
	return reflect.DeepEqual(a, b)
}

func sortCarried(out []carried) {
	slices.SortFunc(out, func(a, b carried) int { return slices.Compare(a.Path, b.Path) })
}

// alwaysDerived is a carried field that is never carried:
// status.requestedRolloutHash is always the hash of the spec (as upstream's
// conversion derives it). A v1 client that writes the spec echoes the
// status it read, which the API server then drops (the status
// subresource), while an annotation would keep the echoed hash of the old
// spec and show it as the new request's: forcePromote set to it would
// never promote. Earlier versions wrote such entries: they are ignored.
func alwaysDerived(f carried) bool {
	return len(f.Path) == 2 && f.Path[0] == "status" && f.Path[1] == "requestedRolloutHash"
}

// restore applies carried fields to obj where they are still fresh.
func restore(obj map[string]any, fields []carried) error {
	for _, f := range fields {
		if len(f.Path) == 0 || alwaysDerived(f) {
			continue
		}
		cur, ok := lookup(obj, f.Path)
		if !bytesEqual(rawOrNil(cur, ok), f.Derived) {
			continue
		}
		if f.Value == nil {
			remove(obj, f.Path)
			continue
		}
		v, err := decodeValue(f.Value)
		if err != nil {
			return fmt.Errorf("%s: %w", echo(strings.Join(f.Path, ".")), err)
		}
		set(obj, f.Path, v)
	}
	return nil
}

// dropCarry removes the named carry annotation, and the annotations when
// it was the last.
func dropCarry(obj map[string]any, key string) {
	annotations, _ := lookupMap(obj, "metadata", "annotations")
	if _, ok := annotations[key].(string); !ok {
		return
	}
	delete(annotations, key)
	if len(annotations) == 0 {
		remove(obj, []string{"metadata", "annotations"})
	}
}

// Carry annotations are untrusted: anyone who may write a Materialize may
// write them. One can restore only what a conversion to the other version
// drops or changes: the carried convertedFields (never apiVersion, kind or
// metadata), each with the type its version's schema gives it, at
// most once. An annotation that does not fit is ignored as a whole, and
// the object converts as if it had none.
const (
	// maxCarryBytes bounds an annotation's size: every value a conversion
	// carries is a UUID, a hash, an ARN or a flag.
	maxCarryBytes = 16 << 10
)

// carriedType is the index in convertedFields and the type of the field
// at path, or "" if no conversion carries it.
func carriedType(path []string) (index int, typ string) {
	for i, c := range convertedFields {
		if c.carried != "" && slices.Equal(c.path, path) {
			return i, c.carried
		}
	}
	return -1, ""
}

// readCarry returns the fields of the named carry annotation, or, when it
// does not fit (see convertedFields), none and why.
func readCarry(obj map[string]any, key string) (fields []carried, ignored string) {
	annotations, _ := lookupMap(obj, "metadata", "annotations")
	raw, ok := annotations[key].(string)
	if !ok {
		return nil, ""
	}
	if len(raw) > maxCarryBytes {
		return nil, fmt.Sprintf("larger than %d bytes", maxCarryBytes)
	}
	fields, canonical := readCanonicalCarry(raw)
	if !canonical {
		if err := json.Unmarshal([]byte(raw), &fields); err != nil {
			return nil, "not a list of carried fields"
		}
	}
	if len(fields) > len(convertedFields) {
		return nil, fmt.Sprintf("%d entries, more than the %d fields a conversion carries", len(fields), len(convertedFields))
	}
	seen := make([]bool, len(convertedFields))
	for _, f := range fields {
		i, want := carriedType(f.Path)
		path := echo(strings.Join(f.Path, "."))
		switch {
		case want == "":
			return nil, fmt.Sprintf("%q is not a field a conversion carries", path)
		case seen[i]:
			return nil, fmt.Sprintf("%q carried twice", path)
		case !rawHasType(f.Value, want) || !rawHasType(f.Derived, want):
			return nil, fmt.Sprintf("%q is not a %s", path, want)
		}
		seen[i] = true
	}
	return fields, ""
}

// readCanonicalCarry reads raw when it is in the form encodeCarry writes
// (compact, each entry's keys path, value, derived in that order, the last
// two optional), as json.Unmarshal would read it: every object written at
// v1 carries one, which every read at v1 reads. ok is false for any other
// form, which json.Unmarshal reads then (reflection costs it half of a
// conversion to v1alpha1).
func readCanonicalCarry(raw string) (fields []carried, ok bool) {
	rest, ok := strings.CutPrefix(raw, "[")
	if !ok {
		return nil, false
	}
	fields = []carried{}
	if rest == "]" {
		return fields, true
	}
	for {
		var f carried
		if rest, ok = strings.CutPrefix(rest, `{"path":[`); !ok {
			return nil, false
		}
		f.Path = []string{}
		for !strings.HasPrefix(rest, "]") {
			if len(f.Path) > 0 {
				if rest, ok = strings.CutPrefix(rest, ","); !ok {
					return nil, false
				}
			}
			key, end, isString := jsonvalue.StringFirst(rest)
			if !isString {
				return nil, false
			}
			f.Path, rest = append(f.Path, key), rest[end:]
		}
		rest = rest[1:]
		if f.Value, rest, ok = rawMember(rest, `,"value":`); !ok {
			return nil, false
		}
		if f.Derived, rest, ok = rawMember(rest, `,"derived":`); !ok {
			return nil, false
		}
		if rest, ok = strings.CutPrefix(rest, "}"); !ok {
			return nil, false
		}
		fields = append(fields, f)
		switch {
		case rest == "]":
			return fields, true
		case strings.HasPrefix(rest, ","):
			rest = rest[1:]
		default:
			return nil, false
		}
	}
}

// rawMember reads the optional member that starts with prefix (its key)
// at the start of s: its value's JSON, and what follows it. ok is false
// when the value is not valid JSON.
func rawMember(s, prefix string) (raw json.RawMessage, rest string, ok bool) {
	after, found := strings.CutPrefix(s, prefix)
	if !found {
		return nil, s, true
	}
	// Nearly always a string, which is checked without being decoded.
	_, end, valid := jsonvalue.StringFirst(after)
	if !valid {
		var err error
		if _, end, err = jsonvalue.DecodeFirst(after); err != nil {
			return nil, s, false
		}
	}
	return json.RawMessage(after[:end]), after[end:], true
}

// rawHasType reports whether raw (absent allowed) is JSON null or a value
// of the type.
func rawHasType(raw json.RawMessage, want string) bool {
	if raw == nil {
		return true
	}
	if _, end, ok := jsonvalue.StringFirst(string(raw)); ok {
		// Most carried values: a string, read without boxing it.
		return end == len(raw) && want == "string"
	}
	v, err := decodeValue(raw)
	if err != nil {
		return false
	}
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return want == "string"
	case bool:
		return want == "bool"
	case json.Number:
		// Any integer: the range is the schema's to check, not the carry's.
		return want == "integer" && !strings.ContainsAny(string(v), ".eE")
	case map[string]any:
		if want != "string map" {
			return false
		}
		for _, e := range v {
			if _, ok := e.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// putCarry records fields in the named annotation; nothing is written when
// there is nothing to carry. A carry is left out (leftOut says why, and an
// annotation of that name goes too) when it would be larger than the way
// back reads (overflow: fields are not all of it), or would take the
// object's annotations past what the API server admits: it refuses the
// whole conversion then, and with it every read of the object, and every
// LIST page it is on, at the other version. The object then converts
// without it, as one whose annotation was removed.
func putCarry(obj map[string]any, key string, fields []carried, overflow bool) (leftOut string) {
	fields = slices.DeleteFunc(fields, alwaysDerived)
	if len(fields) == 0 && !overflow {
		return ""
	}
	var carry []byte
	if !overflow {
		carry = encodeCarry(fields)
	}
	annotations, _ := lookupMap(obj, "metadata", "annotations")
	switch {
	case overflow || len(carry) > maxCarryBytes:
		leftOut = fmt.Sprintf("left out: larger than %d bytes", maxCarryBytes)
	case annotationBytes(annotations, key)+len(key)+len(carry) > maxAnnotationBytes:
		leftOut = fmt.Sprintf("left out: the object's annotations would exceed the API server's %d bytes", maxAnnotationBytes)
	default:
		// Nothing writes to carry again: the annotation shares its bytes.
		set(obj, []string{"metadata", "annotations", key}, unsafe.String(unsafe.SliceData(carry), len(carry)))
		return ""
	}
	dropCarry(obj, key)
	return leftOut
}

// maxAnnotationBytes is the API server's bound on an object's annotations,
// keys and values together (apimachinery's TotalAnnotationSizeLimitB).
const maxAnnotationBytes = 256 << 10

// annotationBytes is the size the API server counts of annotations, the
// one named skip apart.
func annotationBytes(annotations map[string]any, skip string) int {
	n := 0
	for k, v := range annotations {
		if s, ok := v.(string); ok && k != skip {
			n += len(k) + len(s)
		}
	}
	return n
}

func rawOrNil(v any, present bool) json.RawMessage {
	if !present {
		return nil
	}
	return appendValue(nil, v)
}

// appendValue appends v's JSON to dst.
func appendValue(dst []byte, v any) []byte {
	out, err := jsonvalue.Append(dst, v)
	if err != nil {
		// Values come from decoded JSON, which always re-encodes.
		panic(err)
	}
	return out
}

// encodeCarry writes fields as json.Marshal would, without reflection:
// the read path writes an annotation for every object it converts.
func encodeCarry(fields []carried) []byte {
	size := 2
	for _, f := range fields {
		size += 32 + len(f.Value) + len(f.Derived)
		for _, k := range f.Path {
			size += len(k) + 3
		}
	}
	out := append(make([]byte, 0, size), '[')
	for i, f := range fields {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"path":[`...)
		for j, k := range f.Path {
			if j > 0 {
				out = append(out, ',')
			}
			out = jsonvalue.AppendString(out, k)
		}
		out = append(out, ']')
		// Value and Derived come from jsonvalue.Append: compact and
		// escaped as json.Marshal leaves a RawMessage.
		if len(f.Value) > 0 {
			out = append(append(out, `,"value":`...), f.Value...)
		}
		if len(f.Derived) > 0 {
			out = append(append(out, `,"derived":`...), f.Derived...)
		}
		out = append(out, '}')
	}
	return append(out, ']')
}

func bytesEqual(a, b json.RawMessage) bool {
	return (a == nil) == (b == nil) && string(a) == string(b)
}
