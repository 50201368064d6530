package main

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestUnitTestsPassAndFail(t *testing.T) {
	for _, tc := range []struct {
		file string
		want string // in the error; empty: passes
	}{
		{"testdata/pass_test.yaml", ""},
		// `for` holds an alert pending: the 3m case fails, the 4m one too.
		{"testdata/wrong_test.yaml", "alertname: Down, time: 3m0s"},
		{"testdata/uncovered_test.yaml", "alert Down: no test expects it not to fire"},
		// promtool would compare nothing with nothing.
		{"testdata/typo_test.yaml", `names alert "Dwon", which no rule file defines`},
	} {
		err := testRules(io.Discard, []string{tc.file})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.file, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.file, err, tc.want)
		}
	}
	if err := testRules(io.Discard, []string{"testdata/wrong_test.yaml"}); err == nil || !strings.Contains(err.Error(), "time: 4m0s") {
		t.Errorf("the firing alert at 4m expected silent is not reported: %v", err)
	}
}

func TestRulesRefusedWhenNotEvaluated(t *testing.T) {
	if err := checkRules(io.Discard, []string{"testdata/rules.yaml"}); err != nil {
		t.Fatal(err)
	}
	if err := checkRules(io.Discard, []string{"testdata/recording.yaml"}); err == nil || !strings.Contains(err.Error(), "recording rule job:up:sum") {
		t.Errorf("a recording rule: %v", err)
	}
}

func TestRefs(t *testing.T) {
	var out bytes.Buffer
	if err := printRefs(&out, []string{"testdata/rules.yaml", "testdata/dashboard.json"}); err != nil {
		t.Fatal(err)
	}
	var refs []ref
	if err := json.Unmarshal(out.Bytes(), &refs); err != nil {
		t.Fatal(err)
	}
	got := map[string][2][]string{}
	for _, r := range refs {
		got[r.Source] = [2][]string{r.Metrics, r.Labels}
	}
	want := map[string][2][]string{
		"testdata/rules.yaml: Down":                        {{"up"}, {"job"}},
		`testdata/dashboard.json: panel "rate" target 0`:   {{"http_requests_total"}, {"code", "namespace"}},
		`testdata/dashboard.json: panel "joined" target 0`: {{"process_resident_memory_bytes", "up"}, {"job", "pod"}},
		"testdata/dashboard.json: variable namespace":      {{"up"}, {"namespace"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("refs:\n got %v\nwant %v", got, want)
	}
}
