package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/test/fixture"
)

// stdDecode is what Decode must agree with: encoding/json into any, numbers
// as json.Number, one value and nothing after it.
func stdDecode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, errors.New("data after the value")
	}
	return v, nil
}

var samples = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `-12E+4`, `""`,
	` {"a" : [1, 2 ,{"b":null}] , "c":"d"} `,
	`{"a":1,"a":2}`,
	`"\u00e9\ud83d\ude00 \ud800 \udc00x \u2028\u2029 <&> \b\f\n\r\t\/\"\\"`,
	"\"\xff\xfe valid \xe2\x82\xac \xed\xa0\x80\"",
	`"\u0000\u001f\u007f"`,
	`{"":"","\u0041":1}`,
	// Keys out of order, prefixes of each other, bytes above ASCII.
	`{"z":1,"y":2,"b":3,"ba":4,"a":5,"ab":6,"":7,"B":8,"\u00e9":9,"e\u0301":10}`,
	// Long enough for the skip of plain words, with what stops it between them.
	"\"registry.example/materialize/environmentd:v26.5.0 <&> \\\" \u2028 \xc3\xa9 \xff tail\"",
	// Invalid input, which both must refuse.
	`{`, `[`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `1e`, `-`, `+1`,
	`"abc`, `"\x"`, `"\u12"`, `"\'"`, "\"\n\"", `tru`, `nul`, `[1 2]`, `{"a":1 "b":2}`, `1 2`, ``, ` `,
	`{"a":1}x`, `[]]`, `{1:2}`,
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, s := range append(samples, string(fixture.V1alpha1Materialize(7))) {
		checkDecode(t, []byte(s))
	}
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	for _, s := range append(samples, string(fixture.V1alpha1Materialize(7))) {
		checkEncode(t, []byte(s))
	}
	// Up to past the members a sort keeps on the stack, keys in reverse.
	for n := range 2*stackMembers + 2 {
		var obj strings.Builder
		for i := n; i > 0; i-- {
			fmt.Fprintf(&obj, `,"k%02d":%d`, i, i)
		}
		checkEncode(t, []byte("{"+strings.TrimPrefix(obj.String(), ",")+"}"))
	}
	// Values no decoder makes, which Append must still write as
	// json.Marshal does.
	for _, v := range []any{
		map[string]any(nil), []any(nil), json.Number(""), 3, 2.5, []string{"x"},
		map[string]any{"n": map[string]any{"z": 1, "a": []any{}}},
	} {
		want, _ := json.Marshal(v)
		got, err := Append(nil, v)
		if err != nil || string(got) != string(want) {
			t.Errorf("Append(%#v) = %s, %v; json.Marshal gives %s", v, got, err, want)
		}
	}
	if _, err := Append(nil, json.Number("1x")); err == nil {
		t.Error("Append wrote an invalid json.Number")
	}
}

func TestDecodeRefusesDeepNesting(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if _, err := Decode([]byte(deep)); err == nil || !strings.Contains(err.Error(), "max depth") {
		t.Fatalf("Decode of %d nested arrays: %v, want a depth error", MaxDepth+1, err)
	}
	ok := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	if _, err := Decode([]byte(ok)); err != nil {
		t.Fatalf("Decode of %d nested objects: %v", MaxDepth, err)
	}
}

// Substrings of the input must not change when the caller's buffer does.
func TestDecodeCopiesItsInput(t *testing.T) {
	data := []byte(`{"name":"mz"}`)
	v, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	copy(data, `{"xxxx":"xx"}`)
	if name := v.(map[string]any)["name"]; name != "mz" {
		t.Fatalf("after the input changed, name = %v", name)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range samples {
		f.Add([]byte(s))
	}
	f.Add(fixture.V1alpha1Materialize(1))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		checkEncode(t, data)
	})
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := stdDecode(data)
	got, err := Decode(data)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("Decode(%q): error %v; encoding/json: %v", data, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q) = %#v; encoding/json: %#v", data, got, want)
	}
}

func checkEncode(t *testing.T, data []byte) {
	t.Helper()
	v, err := stdDecode(data)
	if err != nil {
		return
	}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Append([]byte("prefix"), v)
	if err != nil || string(got) != "prefix"+string(want) {
		t.Fatalf("Append(%q) = %s, %v; json.Marshal: %s", data, got, err, want)
	}
}

// go test -run '^$' -bench . -benchmem ./pkg/jsonvalue
func BenchmarkDecode(b *testing.B) {
	data := fixture.V1alpha1Materialize(1)
	b.Run("jsonvalue", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := stdDecode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	v, err := Decode(fixture.V1alpha1Materialize(1))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("jsonvalue", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			if buf, err = Append(buf[:0], v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// StringLen is what AppendString appends, for any bytes.
func FuzzStringLen(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&</a>", "\x00\x1f\n\t\\\"", "\u2028\u2029é", "\xff\xfe", strings.Repeat("<x>", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := StringLen(s), len(AppendString(nil, s)); got != want {
			t.Fatalf("StringLen(%q) = %d, AppendString wrote %d bytes", s, got, want)
		}
	})
}
