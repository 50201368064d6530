package conversion

import (
	"encoding/json"
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
