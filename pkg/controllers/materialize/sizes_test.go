package materialize

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The chart's sizes parse, each with a memory limit.
func TestDefaultSizesParseAsEnvironmentdParsesThem(t *testing.T) {
	sizes, err := parseReplicaSizes(DefaultClusterReplicaSizes)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) < 10 || len(sizesWithoutMemoryLimit(sizes)) != 0 {
		t.Errorf("%d sizes, without a memory limit: %v", len(sizes), sizesWithoutMemoryLimit(sizes))
	}
}

// What environmentd's ReplicaAllocation refuses is refused here.
func TestInvalidSizesAreRefused(t *testing.T) {
	ok := `"scale":1,"workers":1,"credits_per_hour":"1"`
	for _, c := range []struct{ sizes, want string }{
		{`[]`, "not a JSON map"},
		{`null`, "not a JSON map"},
		{`{"a":{` + ok + `}} trailing`, "not a JSON map"},
		{`{"a":{` + ok + `,"memory_limit":" 4GiB"}}`, "not a valid size in bytes"},
		{`{"a":{` + ok + `,"disabled":null}}`, "is not a boolean"},
		{`{"a":{` + ok + `,"selectors":null}}`, "not a map of strings"},
		{`{"a":null}`, "not an object"},
		{`{"a":{"workers":1,"credits_per_hour":"1"}}`, "missing field `scale`"},
		{`{"a":{"scale":0,"workers":1,"credits_per_hour":"1"}}`, "scale: 0 is not a non-zero integer"},
		{`{"a":{"scale":70000,"workers":1,"credits_per_hour":"1"}}`, "more than 65535"},
		{`{"a":{"scale":1,"workers":1.5,"credits_per_hour":"1"}}`, "workers: 1.5 is not a non-zero integer"},
		{`{"a":{"scale":1,"workers":1,"credits_per_hour":1}}`, "credits_per_hour: 1 is not a numeric string"},
		{`{"a":{` + ok + `,"memory_limit":"4 gigs"}}`, `memory_limit: "4 gigs" is not a valid size in bytes`},
		{`{"a":{` + ok + `,"disk_limit":4}}`, "disk_limit: 4 is not a valid size in bytes"},
		{`{"a":{` + ok + `,"cpu_limit":-1}}`, "not a plausible number of CPUs"},
		{`{"a":{` + ok + `,"swap_enabled":"yes"}}`, "is not a boolean"},
		{`{"a":{` + ok + `,"selectors":{"k":1}}}`, "not a map of strings"},
	} {
		if _, err := parseReplicaSizes(c.sizes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.sizes, err, c.want)
		}
	}
	sizes, err := parseReplicaSizes(`{"b":{` + ok + `,"memory_limit":"1.5 GiB","cpu_limit":null,"family":null,"extra":1,"credits_per_hour":"1e-1"},"a":{` + ok + `}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := sizesWithoutMemoryLimit(sizes); len(got) != 1 || got[0] != "a" {
		t.Errorf("without memory limit: %v", got)
	}
}

// The operator refuses to start with sizes environmentd would refuse, or a
// bootstrap size it does not offer.
func TestConfigRefusesSizesEnvironmentdRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{`--environmentd-cluster-replica-sizes={"a":{"scale":1}}`}, "missing field `workers`"},
		{[]string{`--environmentd-cluster-replica-sizes={"a":{"scale":1,"workers":1,"credits_per_hour":"1","memory_limit":"1GiB"}}`,
			"--bootstrap-default-cluster-replica-size=b"},
			`--bootstrap-default-cluster-replica-size: "b" is not one of --environmentd-cluster-replica-sizes`},
	} {
		var cfg Config
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		if err := fs.Parse(append([]string{"--cloud-provider=local", "--region=kind"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Complete(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}
