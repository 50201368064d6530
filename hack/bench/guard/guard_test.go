package guard

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLineRoundTrips(t *testing.T) {
	in := map[string]float64{"resync_s": 3.7, "writes_per_materialize": 26.97, "rss_mib": 96}
	line := Line("controllers n=1000", in)
	if line != "bench controllers n=1000: resync_s=3.7 rss_mib=96 writes_per_materialize=26.97" {
		t.Fatalf("Line = %q", line)
	}
	name, out, err := Parse(line)
	if err != nil || name != "controllers n=1000" || len(out) != 3 || out["resync_s"] != 3.7 {
		t.Fatalf("Parse(%q) = %q, %v, %v", line, name, out, err)
	}
	for _, bad := range []string{"", "resync_s=1", "bench :x=1", "bench a: x", "bench a: x=NaN", "bench a: x=1e999"} {
		if _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestRecordReplacesOnlyItsLine(t *testing.T) {
	doc := "# Benchmarks\n\n```text\nbench a: x=1\nbench b n=10: y=2\n```\n"
	got, err := Record([]byte(doc), "bench b n=10: y=3")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(doc, "y=2", "y=3", 1); string(got) != want {
		t.Fatalf("Record = %q, want %q", got, want)
	}
	if figures, ok := Recorded(got, "b n=10"); !ok || figures["y"] != 3 {
		t.Fatalf("Recorded = %v, %v", figures, ok)
	}
	if _, err := Record([]byte(doc), "bench c: z=1"); err == nil {
		t.Error("Record added a summary the document did not hold")
	}
}

func TestCompareFlagsMovesBeyondTheThreshold(t *testing.T) {
	changes := Compare(map[string]float64{"a": 10, "b": 10, "c": 10, "z": 0, "tiny": 0.001}, map[string]float64{"a": 12.5, "b": 7.5, "c": 11, "z": 1, "new": 5, "tiny": 0.003}, 0.2, 0.05)
	got := map[string]Change{}
	for _, c := range changes {
		got[c.Key] = c
	}
	if !got["a"].Regressed || got["a"].Improved {
		t.Errorf("a 10 -> 12.5: %+v, want regressed", got["a"])
	}
	if !got["b"].Improved || got["b"].Regressed {
		t.Errorf("b 10 -> 7.5: %+v, want improved", got["b"])
	}
	if got["c"].Regressed || got["c"].Improved {
		t.Errorf("c 10 -> 11: %+v, want within", got["c"])
	}
	if !got["z"].Regressed {
		t.Errorf("z 0 -> 1: %+v, want regressed", got["z"])
	}
	if got["tiny"].Regressed || got["tiny"].Improved {
		t.Errorf("tiny 0.001 -> 0.003: %+v, want within (below the floor)", got["tiny"])
	}
	if !got["new"].NotRecorded || got["new"].Regressed {
		t.Errorf("new: %+v, want not recorded", got["new"])
	}
}

func TestCheckRecordsThenFailsOnARegression(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(doc, []byte("# figures\n\n    bench w: cost=1\n\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(doc, "w", map[string]float64{"cost": 2}, 0.25, 0.01, true, io.Discard); err != nil {
		t.Fatalf("record: %v", err)
	}
	text, _ := os.ReadFile(doc)
	if want := "# figures\n\nbench w: cost=2\n\nafter\n"; string(text) != want {
		t.Fatalf("recorded document:\n%s\nwant:\n%s", text, want)
	}
	if err := Check(doc, "w", map[string]float64{"cost": 2.4}, 0.25, 0.01, false, io.Discard); err != nil {
		t.Fatalf("+20%% within a 25%% threshold failed: %v", err)
	}
	if err := Check(doc, "w", map[string]float64{"cost": 2.6}, 0.25, 0.01, false, io.Discard); err == nil {
		t.Fatal("+30% beyond a 25% threshold passed")
	}
	if err := Check(doc, "other", map[string]float64{"cost": 1}, 0.25, 0.01, false, io.Discard); err == nil {
		t.Fatal("a summary never recorded passed")
	}
}
