package conversion

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
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

// diff lists, in path order, the leaves where want (the original) and got
// (what the plain conversion back would give) differ.
func diff(want, got map[string]any) []carried {
	var out []carried
	diffInto(&out, nil, want, got)
	sort.Slice(out, func(i, j int) bool {
		return strings.Join(out[i].Path, "\x00") < strings.Join(out[j].Path, "\x00")
	})
	return out
}

func diffInto(out *[]carried, path []string, want, got map[string]any) {
	keys := map[string]struct{}{}
	for k := range want {
		keys[k] = struct{}{}
	}
	for k := range got {
		keys[k] = struct{}{}
	}
	for k := range keys {
		p := append(append([]string(nil), path...), k)
		w, wok := want[k]
		g, gok := got[k]
		wm, wIsMap := w.(map[string]any)
		gm, gIsMap := g.(map[string]any)
		switch {
		case wok && gok && wIsMap && gIsMap:
			diffInto(out, p, wm, gm)
		case wok != gok || !reflect.DeepEqual(w, g):
			*out = append(*out, carried{Path: p, Value: rawOrNil(w, wok), Derived: rawOrNil(g, gok)})
		}
	}
}

// restore applies carried fields to obj where they are still fresh.
func restore(obj map[string]any, fields []carried) error {
	for _, f := range fields {
		if len(f.Path) == 0 {
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
			return fmt.Errorf("%s: %w", strings.Join(f.Path, "."), err)
		}
		set(obj, f.Path, v)
	}
	return nil
}

// takeCarry removes the named carry annotation and returns its fields. An
// annotation that does not parse is dropped: it can only have been written
// by hand, and ignoring it loses nothing a conversion put there.
func takeCarry(obj map[string]any, key string) []carried {
	annotations, _ := lookupMap(obj, "metadata", "annotations")
	raw, ok := annotations[key].(string)
	if !ok {
		return nil
	}
	delete(annotations, key)
	if len(annotations) == 0 {
		remove(obj, []string{"metadata", "annotations"})
	}
	var fields []carried
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return nil
	}
	return fields
}

// putCarry records fields in the named annotation; nothing is written when
// there is nothing to carry.
func putCarry(obj map[string]any, key string, fields []carried) {
	if len(fields) == 0 {
		return
	}
	raw, _ := json.Marshal(fields)
	set(obj, []string{"metadata", "annotations", key}, string(raw))
}

func rawOrNil(v any, present bool) json.RawMessage {
	if !present {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		// Values come from decoded JSON, which always re-encodes.
		panic(err)
	}
	return raw
}

func bytesEqual(a, b json.RawMessage) bool {
	return (a == nil) == (b == nil) && string(a) == string(b)
}
