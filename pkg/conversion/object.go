package conversion

import "github.com/materializeinc/orchestratord/pkg/jsonvalue"

// Objects are handled as decoded JSON (numbers kept as json.Number) so that
// every field either version does not know passes through untouched.

func decodeValue(raw []byte) (any, error) {
	return jsonvalue.Decode(raw)
}

func lookup(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func lookupMap(obj map[string]any, path ...string) (map[string]any, bool) {
	v, ok := lookup(obj, path)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}

func lookupString(obj map[string]any, path ...string) (string, bool) {
	v, ok := lookup(obj, path)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// set creates intermediate objects as needed, replacing non-objects.
func set(obj map[string]any, path []string, v any) {
	cur := obj
	for _, k := range path[:len(path)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[path[len(path)-1]] = v
}

func remove(obj map[string]any, path []string) {
	parent := obj
	if len(path) > 1 {
		m, ok := lookupMap(obj, path[:len(path)-1]...)
		if !ok {
			return
		}
		parent = m
	}
	delete(parent, path[len(path)-1])
}
