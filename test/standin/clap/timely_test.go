package clap

import "testing"

// TimelyConfig parses as serde_json parses it into upstream's struct. The
// answers were produced by serde_json itself (Debian's librust-serde-json
// 1.0.87 with serde 1.0.152, a struct declared as upstream's TimelyConfig),
// but for whole floats, which the serde_core upstream pins (1.0.228) writes
// with ".0" (WithDecimalPoint); "" is a value it accepts.
func TestParseTimelyConfigAsSerdeJSON(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"{\"workers\":2,\"process\":0,\"addresses\":[\"a:1\",\"b:1\"],\"arrangement_exert_proportionality\":16,\"enable_zero_copy\":false,\"enable_zero_copy_lgalloc\":false,\"zero_copy_limit\":null}", ""},
		{"{\"workers\":1,\"process\":0,\"addresses\":[],\"arrangement_exert_proportionality\":0,\"enable_zero_copy\":true,\"enable_zero_copy_lgalloc\":false,\"extra\":[1,{\"x\":2}]}", ""},
		{"[1,0,[\"a:1\"],16,false,false]", "invalid length 6, expected struct TimelyConfig with 7 elements at line 1 column 28"},
		{"{}", "missing field `workers` at line 1 column 2"},
		{"{\"workers\":1}", "missing field `process` at line 1 column 13"},
		{"{\"workers\":\"1\"}", "invalid type: string \"1\", expected usize at line 1 column 14"},
		{"{\"workers\":-1}", "invalid value: integer `-1`, expected usize at line 1 column 13"},
		{"{\"workers\":1.5}", "invalid type: floating point `1.5`, expected usize at line 1 column 14"},
		{"{\"workers\":1,\"workers\":2}", "duplicate field `workers` at line 1 column 22"},
		{"{\"arrangement_exert_proportionality\":4294967296}", "invalid value: integer `4294967296`, expected u32 at line 1 column 47"},
		{"{\"addresses\":\"a\"}", "invalid type: string \"a\", expected a sequence at line 1 column 16"},
		{"{\"addresses\":[1]}", "invalid type: integer `1`, expected a string at line 1 column 15"},
		{"{\"enable_zero_copy\":1}", "invalid type: integer `1`, expected a boolean at line 1 column 21"},
		{"3", "invalid type: integer `3`, expected struct TimelyConfig at line 1 column 1"},
		{"[1,0]", "invalid length 2, expected struct TimelyConfig with 7 elements at line 1 column 5"},
		{"{\"workers\":1,\"process\":0,\"addresses\":[],\"arrangement_exert_proportionality\":0,\"enable_zero_copy\":true,\"enable_zero_copy_lgalloc\":false} x", "trailing characters at line 1 column 137"},
		{"", "EOF while parsing a value at line 1 column 0"},
		{"workers=1", "expected value at line 1 column 1"},
		{"[1,0,[\"a:1\"],16,false,false,null]", ""},
		{"[1,0,[\"a:1\"],16,false,false,null,5]", "trailing characters at line 1 column 34"},
		{"{\"workers\":1,", "EOF while parsing a value at line 1 column 13"},
		{"{\"workers\":1 \"process\":2}", "expected `,` or `}` at line 1 column 14"},
		{"{1:2}", "key must be a string at line 1 column 2"},
		{"{\"workers\":18446744073709551616}", "invalid type: floating point `18446744073709552000.0`, expected usize at line 1 column 31"},
		{"null", "invalid type: null, expected struct TimelyConfig at line 1 column 4"},
		{"\"x\"", "invalid type: string \"x\", expected struct TimelyConfig at line 1 column 3"},
		{"{\"addresses\":{}}", "invalid type: map, expected a sequence at line 1 column 13"},
		{"{", "EOF while parsing an object at line 1 column 1"},
		{"{\"workers\"", "EOF while parsing an object at line 1 column 10"},
		{"{\"workers\":", "EOF while parsing a value at line 1 column 11"},
		{"{\"workers\":1", "EOF while parsing an object at line 1 column 12"},
		{"[1,", "EOF while parsing a value at line 1 column 3"},
		{"[1", "EOF while parsing a list at line 1 column 2"},
		{"{\"addresses\":[\"a\"", "EOF while parsing a list at line 1 column 17"},
		{"{\"addresses\":[\"a\",", "EOF while parsing a value at line 1 column 18"},
		{"{\"addresses\":[", "EOF while parsing a list at line 1 column 14"},
		{"{\"enable_zero_copy\":{}}", "invalid type: map, expected a boolean at line 1 column 20"},
		{"{\"enable_zero_copy\":[1]}", "invalid type: sequence, expected a boolean at line 1 column 20"},
		{"{\"workers\" 1}", "expected `:` at line 1 column 12"},
		{"[1 2]", "expected `,` or `]` at line 1 column 4"},
		{"{\"workers\":tru}", "expected ident at line 1 column 15"},
		{"{\"workers\":\"ab", "EOF while parsing a string at line 1 column 14"},
		{"{\"workers\":x}", "expected value at line 1 column 12"},
		{"{\"a\":1,,}", "key must be a string at line 1 column 8"},
		{"{\"workers\":1,\"process\":nul}", "expected ident at line 1 column 27"},
		{"[1,0,[\"a:1\"],16,false,fals]", "expected ident at line 1 column 27"},
		{"{\"workers\":1e3}", "invalid type: floating point `1000.0`, expected usize at line 1 column 14"},
		{"{\"workers\":0.0}", "invalid type: floating point `0.0`, expected usize at line 1 column 14"},
		{"{\"workers\":\"a\\\"b\"}", "invalid type: string \"a\\\"b\", expected usize at line 1 column 17"},
		{" {\"workers\":1}  ", "missing field `process` at line 1 column 14"},
		{"x", "expected value at line 1 column 1"},
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
