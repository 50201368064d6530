package materialize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
)

// replicaSize is what the operator needs of a --cluster-replica-sizes
// entry once parsed as environmentd parses it.
type replicaSize struct {
	hasMemoryLimit bool
}

// byteSizePattern is what the bytesize crate parses: a number, an optional
// unit (B, K/KB/KiB, M/MB/MiB, ... P/PB/PiB, any case), with white space
// only between the two.
var byteSizePattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?\s*([KkMmGgTtPp][Ii]?[Bb]?|[Bb])?$`)

// numericPattern is a decimal as Numeric's FromStr takes it.
var numericPattern = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// parseReplicaSizes reads sizes as environmentd reads --cluster-replica-sizes
// (upstream ClusterReplicaSizeMap over ReplicaAllocation,
// src/controller/src/clusters.rs, and the limits of src/orchestrator): a map
// of names to allocations whose scale (1..65535) and workers (≥ 1) are
// required integers, credits_per_hour a required numeric string, limits
// byte sizes or CPU counts, the flags booleans, selectors strings; other
// fields are ignored, as serde ignores them. Sizes are checked in name
// order, so the first error is stable.
func parseReplicaSizes(raw string) (map[string]replicaSize, error) {
	var sizes map[string]map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &sizes); err != nil || sizes == nil {
		return nil, fmt.Errorf("not a JSON map of size names to sizes (%v)", err)
	}
	names := make([]string, 0, len(sizes))
	for name := range sizes {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]replicaSize, len(sizes))
	for _, name := range names {
		size := sizes[name]
		if size == nil {
			return nil, fmt.Errorf("size %q: not an object", name)
		}
		for _, f := range []string{"scale", "workers", "credits_per_hour"} {
			if _, ok := size[f]; !ok {
				return nil, fmt.Errorf("size %q: missing field `%s`", name, f)
			}
		}
		var parsed replicaSize
		for field, v := range size {
			if err := checkSizeField(field, v, &parsed); err != nil {
				return nil, fmt.Errorf("size %q: %s: %v", name, field, err)
			}
		}
		out[name] = parsed
	}
	return out, nil
}

func checkSizeField(field string, v json.RawMessage, parsed *replicaSize) error {
	null := bytes.Equal(bytes.TrimSpace(v), []byte("null"))
	switch field {
	case "scale", "workers":
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("%s is not a non-zero integer", v)
		}
		if field == "scale" && n > math.MaxUint16 {
			return fmt.Errorf("%s is more than 65535", v)
		}
	case "credits_per_hour":
		var s string
		if err := json.Unmarshal(v, &s); err != nil || !numericPattern.MatchString(s) {
			return fmt.Errorf("%s is not a numeric string", v)
		}
	case "memory_limit", "disk_limit":
		if null {
			return nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil || !byteSizePattern.MatchString(s) {
			return fmt.Errorf("%s is not a valid size in bytes", v)
		}
		if field == "memory_limit" {
			parsed.hasMemoryLimit = true
		}
	case "cpu_limit", "cpu_request":
		if null {
			return nil
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || f < 0 {
			return fmt.Errorf("%s is not a plausible number of CPUs", v)
		}
	case "cpu_exclusive", "is_cc", "swap_enabled", "disabled":
		var b bool
		if err := json.Unmarshal(v, &b); err != nil || null {
			return fmt.Errorf("%s is not a boolean", v)
		}
	case "family":
		var s *string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("%s is not a string", v)
		}
	case "selectors":
		var m map[string]string
		if err := json.Unmarshal(v, &m); err != nil || null {
			return fmt.Errorf("%s is not a map of strings", v)
		}
	}
	return nil
}

// sizesWithoutMemoryLimit names the sizes environmentd refuses when its
// license key does not allow overriding credit consumption: it computes
// credits from memory (upstream "No memory limit found in cluster
// definition for {name}").
func sizesWithoutMemoryLimit(sizes map[string]replicaSize) []string {
	var out []string
	for name, s := range sizes {
		if !s.hasMemoryLimit {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
