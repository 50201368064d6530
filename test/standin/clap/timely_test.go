package clap

import "testing"

// TimelyConfig parses as serde_json parses it into upstream's struct.
func TestParseTimelyConfigAsSerdeJSON(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"workers":2,"process":0,"addresses":["a:1","b:1"],"arrangement_exert_proportionality":16,"enable_zero_copy":false,"enable_zero_copy_lgalloc":false,"zero_copy_limit":null}`, ""},
		// The Option may be absent; unknown fields are ignored; an array fills the fields in order.
		{`{"workers":1,"process":0,"addresses":[],"arrangement_exert_proportionality":0,"enable_zero_copy":true,"enable_zero_copy_lgalloc":false,"extra":[1,{"x":2}]}`, ""},
		{`[1,0,["a:1"],16,false,false]`, ""},
		{`{}`, "missing field `workers` at line 1 column 2"},
		{`{"workers":1}`, "missing field `process` at line 1 column 13"},
		{`{"workers":"1"}`, `invalid type: string "1", expected usize at line 1 column 14`},
		{`{"workers":-1}`, "invalid value: integer `-1`, expected usize at line 1 column 13"},
		{`{"workers":1.5}`, "invalid type: floating point `1.5`, expected usize at line 1 column 14"},
		{`{"workers":1,"workers":2}`, "duplicate field `workers` at line 1 column 22"},
		{`{"arrangement_exert_proportionality":4294967296}`, "invalid value: integer `4294967296`, expected u32 at line 1 column 47"},
		{`{"addresses":"a"}`, `invalid type: string "a", expected a sequence at line 1 column 16`},
		{`{"addresses":[1]}`, "invalid type: integer `1`, expected a string at line 1 column 15"},
		{`{"enable_zero_copy":1}`, "invalid type: integer `1`, expected a boolean at line 1 column 21"},
		{`3`, "invalid type: integer `3`, expected struct TimelyConfig at line 1 column 1"},
		{`[1,0]`, "invalid length 2, expected struct TimelyConfig with 7 elements at line 1 column 5"},
		{`{"workers":1,"process":0,"addresses":[],"arrangement_exert_proportionality":0,"enable_zero_copy":true,"enable_zero_copy_lgalloc":false} x`, "trailing characters at line 1 column 137"},
		{``, "EOF while parsing a value at line 1 column 0"},
		{`workers=1`, "expected value at line 1 column 1"},
	} {
		_, err := ParseTimelyConfig(tc.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err {
			t.Errorf("%s: %q, want %q", tc.in, got, tc.err)
		}
	}
}
