package conversion

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The carry annotations are read back by json.Unmarshal, and were written
// by json.Marshal before encodeCarry: the bytes must not change.
func TestEncodeCarryMatchesJSONMarshal(t *testing.T) {
	for _, fields := range [][]carried{
		{{Path: []string{"spec", "requestRollout"}, Value: json.RawMessage(`"6f1f"`), Derived: json.RawMessage(`"0b0b"`)}},
		{{Path: []string{"status", "x"}, Value: json.RawMessage(`{"a":[1,null]}`)}, {Path: []string{"a<b>&\"\u2028", ""}, Derived: json.RawMessage(`true`)}},
		{{Path: []string{"k"}}},
	} {
		want, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeCarry(fields); string(got) != string(want) {
			t.Errorf("encodeCarry = %s, json.Marshal = %s", got, want)
		}
	}
}

// carrySamples are lists of carried fields as conversions write them, and
// with what a tenant may put in their place.
var carrySamples = [][]carried{
	{{Path: []string{"spec", "requestRollout"}, Value: json.RawMessage(`"6f1f"`), Derived: json.RawMessage(`"0b0b"`)}},
	{{Path: []string{"status", "x"}, Value: json.RawMessage(`{"a":[1,null]}`)}, {Path: []string{"a<b>&\"\u2028", ""}, Derived: json.RawMessage(`true`)}},
	{{Path: []string{"k"}}, {Path: []string{}}, {Path: []string{"status", "observedGeneration"}, Value: json.RawMessage(`null`), Derived: json.RawMessage(`-1.5e3`)}},
	{},
}

// What conversions write is read without reflection: the form and its
// reader must not drift apart.
func TestWrittenCarryIsReadInItsCanonicalForm(t *testing.T) {
	for _, fields := range carrySamples {
		raw := string(encodeCarry(fields))
		got, ok := readCanonicalCarry(raw)
		if !ok {
			t.Fatalf("%s: not read as the canonical form", raw)
		}
		var want []carried
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read %#v, json.Unmarshal %#v", raw, got, want)
		}
	}
}

// Whatever readCanonicalCarry accepts, it reads as json.Unmarshal does.
func FuzzCanonicalCarryReadsAsJSONUnmarshal(f *testing.F) {
	for _, fields := range carrySamples {
		f.Add(string(encodeCarry(fields)))
	}
	for _, s := range []string{`[]`, `[{"path":["a"],"value":"\ud800"}]`, `[{"path":["a",null]}]`, `[{"path":["a"]},]`,
		`[{"path":["a"],"derived":1,"value":2}]`, `[{"path":["\u0041"],"value":[1,{"b":"\u00e9"}]}]`, "[{\"path\":[\"\xff\"]}]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, ok := readCanonicalCarry(raw)
		if !ok {
			return
		}
		var want []carried
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatalf("%q: read as canonical, json.Unmarshal: %v", raw, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: read %#v, json.Unmarshal %#v", raw, got, want)
		}
	})
}
