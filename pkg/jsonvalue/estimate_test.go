package jsonvalue

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/materializeinc/orchestratord/test/fixture"
)

// liveHeapOf is the heap the decoded value of data holds once the garbage
// of decoding it is collected.
func liveHeapOf(t *testing.T, data string) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v, err := DecodeString(data)
	if err != nil {
		t.Fatalf("%.80s: %v", data, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

func repeated(element string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(element+",", n), ",") + "]"
}

func members(k int, value string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range k {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":%s`, i, value)
	}
	b.WriteByte('}')
	return b.String()
}

// The estimate admission charges must never be below what decoding really
// holds, for the shapes that cost the most per byte, and not so far above
// it for realistic objects that it throttles for nothing.
func TestEstimateBoundsTheDecodedHeap(t *testing.T) {
	shapes := map[string]string{
		"realistic objects": repeated(string(fixture.V1alpha1Materialize(1)), 2000),
		"empty objects":     repeated(`{}`, 100000),
		"empty arrays":      repeated(`[]`, 100000),
		"one-member maps":   repeated(`{"a":""}`, 50000),
		"nine-member maps":  repeated(members(9, "null"), 5000),
		"large maps":        repeated(members(5000, `"x"`), 20),
		"long array":        repeated(`1`, 300000),
		"strings":           repeated(`"a"`, 200000),
		"escaped strings":   repeated(`"\n\u00e9"`, 100000),
		"invalid utf-8":     repeated("\"\xff\xff\xff\"", 100000),
		"escaped keys":      repeated(`{"\u0041":"","b\n":""}`, 30000),
		"nested":            repeated(strings.Repeat(`[`, 40)+strings.Repeat(`]`, 40), 2000),
	}
	for name, data := range shapes {
		estimate, _, _ := Estimate(data, 0)
		live := liveHeapOf(t, data)
		t.Logf("%-18s body %8d  live %9d  estimate %9d  (%.2f)", name, len(data), live, estimate, float64(estimate)/float64(live))
		if estimate < live {
			t.Errorf("%s: estimate %d below the live heap %d", name, estimate, live)
		}
		if name == "realistic objects" && estimate > 2*live {
			t.Errorf("%s: estimate %d is more than twice the live heap %d", name, estimate, live)
		}
	}
}

// The largest element is the costliest value at the given depth: for a
// ConversionReview, one object.
func TestEstimateLargestElement(t *testing.T) {
	small, big := string(fixture.V1alpha1Materialize(1)), members(100, `"x"`)
	review := `{"request":{"objects":[` + small + `,` + big + `,` + small + `]}}`
	total, largest, _ := Estimate(review, 4)
	bigTotal, _, _ := Estimate(big, 0)
	if largest != bigTotal {
		t.Errorf("largest element %d, want the large object's %d", largest, bigTotal)
	}
	if total <= largest {
		t.Errorf("total %d not above the largest element %d", total, largest)
	}
}

// Estimate scans any input without allocating and without panicking.
func FuzzEstimate(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		total, largest, _ := Estimate(data, 2)
		if total < 0 || largest < 0 || largest > total {
			t.Fatalf("Estimate(%q) = %d, %d", data, total, largest)
		}
	})
}

func TestEstimateDoesNotAllocate(t *testing.T) {
	data := string(fixture.ConversionReview("materialize.cloud/v1", 50))
	if n := testing.AllocsPerRun(10, func() { Estimate(data, 4) }); n != 0 {
		t.Errorf("Estimate allocated %v times", n)
	}
}

// Append writes a body's values in at most the body's length plus
// escapeGrowth: the webhook charges a response from it before the
// response exists. Its own output, escaped already, grows by nothing.
func TestEstimateEscapeGrowthIsAppendsGrowth(t *testing.T) {
	for _, data := range []string{
		`{"a":"plain","b":["x",1,true,null]}`,
		`{"arn":"` + strings.Repeat("<", 1000) + `","k<&>":"&amp;"}`,
		`["\u2028\u2029", "` + "\u2028 \u2029 <>&" + `", "é\u003c"]`,
		`{"escaped":"\u003c\u003e\u0026 \" \\ \n"}`,
		`"` + strings.Repeat("a<b>c&d\u2028", 300) + `"`,
	} {
		v, err := DecodeString(data)
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		out, err := Append(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		compact, err := Append(nil, mustDecode(t, string(out)))
		if err != nil {
			t.Fatal(err)
		}
		_, _, growth := Estimate(data, 0)
		_, _, compactGrowth := Estimate(string(compact), 0)
		if compactGrowth != 0 {
			t.Errorf("%q: an already escaped body grows by %d", compact, compactGrowth)
		}
		if int64(len(out)) > int64(len(data))+growth {
			t.Errorf("%q: encoded %d bytes, %d more than the body's %d, more than the estimated %d",
				data, len(out), int64(len(out))-int64(len(data)), len(data), growth)
		}
	}
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
