package upstream_test

// The differential test of issue #25: this project's conversion and rollout
// hash (pkg/conversion) against a model of upstream's serde semantics, the
// Rust crate in oracle/ (see oracle/README.md), on thousands of generated
// objects per run (differential_gen_test.go).
//
// For every object the test compares:
//   - the rollout hash of its spec (conversion.RolloutHash against
//     upstream's generate_rollout_hash, or both refusing the spec);
//   - its conversion to the other version (conversion.Convert against
//     upstream's convert_v1alpha1_to_v1 / convert_v1_to_v1alpha1), after
//     removing this project's carry annotations (conversion.materialize.cloud/…)
//     and comparing numbers by value;
//   - for an object upstream reads whole, that upstream's typed reader of
//     the other version also reads what Convert made of it;
//   - for a v1 write, the storage round trip: the v1alpha1 object this
//     webhook stores, as upstream sees it after a switch back (its
//     webhook's v1, its controller's rollout hash), against the object
//     upstream's own webhook would have stored.
//
// A divergence fails the test unless a named allowance below says the
// project differs on purpose. Each kind of divergence is reported once,
// with its count and an example shrunk to what still shows it.
//
// UPSTREAM_DIFFERENTIAL_SEED repeats a run; UPSTREAM_DIFFERENTIAL_OBJECTS
// changes its size (default 6000).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/pkg/conversion"
	"github.com/materializeinc/orchestratord/pkg/jsonvalue"
)

const (
	defaultObjects = 6000
	carryPrefix    = "conversion.materialize.cloud/"
	// debianRegistry is where Debian's librust-*-dev packages put crates.
	debianRegistry = "/usr/share/cargo/registry"
	debianPackages = "librust-serde-dev librust-serde-derive-dev librust-serde-json-dev librust-sha2-dev librust-uuid-dev"
	// Shrinking examples is bounded so a failing run stays short.
	shrinkBudget = 8 * time.Second
	shrinkEach   = time.Second
)

// The crates oracle/Cargo.toml needs, as Debian names their directories.
var debianCrates = []string{"serde-1.", "serde_derive-1.", "serde_json-1.", "sha2-0.10.", "uuid-1."}

// allowances are where this project differs from upstream on purpose.
var allowances = []allowance{
	{
		name:   "observedGeneration",
		reason: "status.observedGeneration is this project's v1alpha1 field; v1 has none, so Convert drops it (and carries it) on the way to v1 (docs/conversion.md), where upstream passes the unknown field through",
		match: func(d difference) bool {
			return d.probe == "to_v1" && d.kind == "only upstream" && slices.Equal(d.path, []string{"status", "observedGeneration"})
		},
	},
	{
		name:   "shared with upstream",
		reason: "upstream's typed reader refuses upstream's own conversion of the object too (a field it passes through that the other version's type cannot hold), so this is no difference between the two",
		match:  func(d difference) bool { return d.kind == "refused, as upstream's own output is" },
	},
	{
		name:   "metadata shape",
		reason: "Convert refuses metadata that is not an object and annotations that are not strings, which the API server cannot send; upstream reads metadata as any JSON value",
		match: func(d difference) bool {
			if d.kind != "Go error" {
				return false
			}
			return strings.HasPrefix(d.goSide, "metadata: must be an object") || strings.HasPrefix(d.goSide, "metadata.annotations")
		},
	},
}

type allowance struct {
	name, reason string
	match        func(difference) bool
}

// difference is one way the two sides disagree on one object.
type difference struct {
	probe        string   // to_v1, to_v1alpha1, hash, read back
	path         []string // where in the output, for conversions
	kind         string   // only upstream, only Go, differs, Go error, upstream error, refused
	upstream     string   // what upstream made of it
	goSide       string   // what Go made of it
	upstreamFull string   // whole outputs, for the report
	goFull       string
	// cause, when known, tells divergences of the same shape apart: why
	// upstream reads the object as partial, or either side's error.
	cause string
}

// category groups differences for the report: the probe, the first two
// path elements, the kind (and for refusals upstream's error).
func (d difference) category() string {
	path := d.path
	if len(path) > 2 {
		path = path[:2]
	}
	c := d.probe
	if len(path) > 0 {
		c += " " + strings.Join(path, ".")
	}
	c += ": " + d.kind
	if strings.HasPrefix(d.kind, "refused") {
		c += ": " + d.upstream
	}
	if d.cause != "" {
		c += " [" + errorClass(d.cause) + "]"
	}
	return c
}

var (
	quoted = regexp.MustCompile("`[^`]*`|\"[^\"]*\"")
	digits = regexp.MustCompile(`[0-9]+`)
)

// errorClass is an error message without the values it quotes.
func errorClass(msg string) string {
	return digits.ReplaceAllString(quoted.ReplaceAllString(msg, "…"), "N")
}

func TestDifferentialAgainstUpstreamSerde(t *testing.T) {
	bin := buildOracle(t)

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("UPSTREAM_DIFFERENTIAL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("UPSTREAM_DIFFERENTIAL_SEED: %v", err)
		}
	}
	n := defaultObjects
	if s := os.Getenv("UPSTREAM_DIFFERENTIAL_OBJECTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("UPSTREAM_DIFFERENTIAL_OBJECTS: %q is not a positive number", s)
		}
	}
	t.Logf("seed %d (UPSTREAM_DIFFERENTIAL_SEED=%d repeats this run), %d objects", seed, seed, n)

	o := startOracle(t, bin)
	start := time.Now()
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var cases []*probeCase
	versions := []string{conversion.V1Alpha1, conversion.V1}
	odd := 0
	for i := range n {
		g := &gen{r: r, allowOdd: r.Float64() < 0.25}
		obj := g.object(versions[i%2])
		if g.odd {
			odd++
		}
		raw := mustEncode(t, obj)
		c := newCase("convert", raw, g.odd)
		c.obj = obj
		cases = append(cases, c)
		if _, ok := obj["spec"].(map[string]any); ok {
			c := newCase("hash", raw, g.odd)
			c.obj = obj
			cases = append(cases, c)
		}
	}
	generated := time.Since(start)

	// Go's side, then every oracle request in one batch.
	start = time.Now()
	var requests [][]byte
	for _, c := range cases {
		c.prepare(t)
		requests = append(requests, c.requests...)
	}
	goTime := time.Since(start)
	start = time.Now()
	responses := o.batch(t, requests)
	oracleTime := time.Since(start)

	type seen struct {
		count, admissible int
		example           *probeCase
		diff              difference
	}
	found := map[string]*seen{}
	allowed := map[string]int{}
	// record counts c's differences, allowed or not, and reports whether
	// any is not allowed.
	record := func(c *probeCase, diffs []difference) (diverged bool) {
		for _, d := range diffs {
			if a := allowedBy(d); a != "" {
				allowed[a]++
				continue
			}
			diverged = true
			s := found[d.category()]
			if s == nil {
				s = &seen{}
				found[d.category()] = s
			}
			s.count++
			if !c.odd {
				s.admissible++
			}
			// The smallest example, preferring one the schema admits.
			better := s.example == nil || (s.example.odd && !c.odd) ||
				(s.example.odd == c.odd && len(c.input) < len(s.example.input))
			if better {
				s.example, s.diff = c, d
			}
		}
		return diverged
	}
	agreed := 0
	for _, c := range cases {
		diffs := c.judge(responses[:len(c.requests)])
		responses = responses[len(c.requests):]
		diverged := record(c, diffs)
		if !diverged {
			agreed++
		}
	}
	// The storage round trip of every v1 write both sides convert: stored
	// as this webhook converts it, then, after a switch back, served to v1
	// readers by upstream's webhook and hashed by upstream's controller;
	// against the same object stored as upstream's webhook converts it.
	var trips []*probeCase
	var tripRequests [][]byte
	for _, c := range cases {
		if c.kind != "convert" || c.from != conversion.V1 || c.goErr != nil || c.upOut == nil {
			continue
		}
		ours, theirs := mustEncode(t, c.goOut), mustEncode(t, c.upOut)
		trips = append(trips, c)
		tripRequests = append(tripRequests,
			fmt.Appendf(nil, `{"op":"to_v1","object":%s}`, ours), fmt.Appendf(nil, `{"op":"to_v1","object":%s}`, theirs),
			fmt.Appendf(nil, `{"op":"hash","object":%s}`, ours), fmt.Appendf(nil, `{"op":"hash","object":%s}`, theirs))
	}
	tripResponses := o.batch(t, tripRequests)
	tripsAgreed := 0
	for i, c := range trips {
		r := tripResponses[4*i : 4*i+4]
		if !record(c, roundTripDifferences(c, r[0], r[1], r[2], r[3])) {
			tripsAgreed++
		}
	}
	t.Logf("%d v1 writes followed through storage (4 oracle requests each): %d agree (or differ only as allowed)", len(trips), tripsAgreed)
	t.Logf("%d objects (%d with values the CRD schema would not admit), %d probes, %d oracle requests: generating %v, Go %v, oracle %v",
		n, odd, len(cases), len(requests), generated.Round(time.Millisecond), goTime.Round(time.Millisecond),
		oracleTime.Round(time.Millisecond))
	t.Logf("%d of %d probes agree (or differ only as allowed)", agreed, len(cases))
	for _, a := range allowances {
		if allowed[a.name] > 0 {
			t.Logf("allowed %q %d times: %s", a.name, allowed[a.name], a.reason)
		}
	}

	categories := make([]string, 0, len(found))
	for c := range found {
		categories = append(categories, c)
	}
	sort.Strings(categories)
	deadline := time.Now().Add(shrinkBudget)
	admissibleKinds := 0
	for _, category := range categories {
		s := found[category]
		example, diff := s.example, s.diff
		if time.Now().Before(deadline) && !strings.HasPrefix(category, roundTripProbe) {
			example, diff = shrink(t, o, example, category, deadline)
		}
		admissible := "only in objects the CRD schema would not admit"
		if s.admissible > 0 {
			admissible = fmt.Sprintf("%d in objects the schema admits", s.admissible)
			admissibleKinds++
		}
		t.Errorf("DIVERGENCE %s\n  %d probes (%s)\n  input:    %s\n  upstream: %s\n  Go:       %s\n  whole outputs:\n    upstream: %s\n    Go:       %s",
			category, s.count, admissible, example.describeInput(), diff.upstream, diff.goSide, diff.upstreamFull, diff.goFull)
	}
	o.close()
	if len(categories) > 0 {
		t.Logf("%d kinds of divergence, %d of them seen in objects the CRD schema admits; oracle CPU %v (shrinking examples included)",
			len(categories), admissibleKinds, o.cpu().Round(time.Millisecond))
	} else {
		t.Logf("no divergence; oracle CPU %v", o.cpu().Round(time.Millisecond))
	}
}

func allowedBy(d difference) string {
	for _, a := range allowances {
		if a.match(d) {
			return a.name
		}
	}
	return ""
}

// probeCase is one comparison: an object and what is asked of both sides.
type probeCase struct {
	kind  string // convert (with the read back), hash
	input []byte
	odd   bool

	// Filled by prepare.
	obj        map[string]any
	from, to   string
	goOut      map[string]any
	goErr      error
	upOut      map[string]any // upstream's conversion, when it made one
	goHash     string
	hashInput  map[string]any // the hash probe's spec and annotations
	requests   [][]byte       // one JSON object each, without its id
	skipReason string
}

func newCase(kind string, input []byte, odd bool) *probeCase {
	return &probeCase{kind: kind, input: input, odd: odd}
}

// prepare runs Go's side and lists the oracle requests.
func (c *probeCase) prepare(t testing.TB) {
	c.requests = nil
	// Convert and RolloutHash do not modify their input: the decoded
	// input (or the generated object it encodes) serves every probe.
	if c.obj == nil {
		c.obj = mustDecode(t, c.input).(map[string]any)
	}
	c.from, _ = c.obj["apiVersion"].(string)
	c.to = conversion.V1
	if c.from == conversion.V1 {
		c.to = conversion.V1Alpha1
	}
	switch c.kind {
	case "convert":
		c.goOut, c.goErr = conversion.Convert(c.obj, c.to)
		req := fmt.Appendf(nil, `{"op":%q,"object":%s`, opFor(c.to), c.input)
		if c.goErr == nil {
			// Upstream's reader of the target version must read what
			// Convert made of an object upstream reads whole.
			req = append(append(req, `,"read_back":`...), mustEncode(t, c.goOut)...)
		}
		c.requests = append(c.requests, append(req, '}'))
	case "hash":
		spec, _ := c.obj["spec"].(map[string]any)
		annotations, ok := stringMap(c.obj)
		if !ok {
			c.skipReason = "annotations are not strings"
			return
		}
		c.hashInput = map[string]any{"spec": spec}
		if annotations != nil {
			c.hashInput["annotations"] = anyMap(annotations)
		}
		c.goHash, c.goErr = conversion.RolloutHash(spec, annotations)
		// The oracle takes spec and annotations from the object.
		c.requests = append(c.requests, fmt.Appendf(nil, `{"op":"hash","object":%s}`, c.input))
	}
}

func opFor(apiVersion string) string { return "to_" + short(apiVersion) }

func short(apiVersion string) string { return strings.TrimPrefix(apiVersion, "materialize.cloud/") }

// stringMap is metadata.annotations when it is absent or all strings.
func stringMap(obj map[string]any) (map[string]string, bool) {
	meta, _ := obj["metadata"].(map[string]any)
	raw, present := meta["annotations"]
	if !present || raw == nil {
		return nil, true
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, false
	}
	out := map[string]string{}
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

func anyMap(m map[string]string) any {
	if m == nil {
		return nil
	}
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// judge compares both sides given the oracle's responses to c.requests.
func (c *probeCase) judge(responses []map[string]any) []difference {
	if c.skipReason != "" {
		return nil
	}
	switch c.kind {
	case "convert":
		return c.judgeConvert(responses[0])
	default:
		r := responses[0]
		upHash, _ := r["hash"].(string)
		upErr, _ := r["error"].(string)
		d := difference{probe: "hash", upstream: "hash " + upHash, goSide: "hash " + c.goHash}
		if upErr != "" {
			d.upstream = "error: " + upErr
		}
		if c.goErr != nil {
			d.goSide = "error: " + c.goErr.Error()
		}
		d.upstreamFull, d.goFull = d.upstream, d.goSide
		switch {
		case upErr != "" && c.goErr != nil:
			return nil
		case upErr != "":
			d.kind = "upstream refuses the spec, Go hashes it"
			d.cause = upErr
		case c.goErr != nil:
			d.kind = "Go refuses the spec, upstream hashes it"
			// Go's messages start with the field; the rest is the class.
			msg := c.goErr.Error()
			d.cause = msg[strings.LastIndex(msg, ": ")+2:]
		case upHash != c.goHash:
			d.kind = "different hashes"
		default:
			return nil
		}
		return []difference{d}
	}
}

func (c *probeCase) judgeConvert(r map[string]any) []difference {
	probe := opFor(c.to)
	upErr, _ := r["error"].(string)
	upOut, _ := r["object"].(map[string]any)
	if upErr == "" {
		c.upOut = upOut
	}
	switch {
	case upErr != "" && c.goErr != nil:
		return nil
	case upErr != "":
		return []difference{{probe: probe, kind: "upstream error", upstream: upErr, goSide: compact(c.goOut), upstreamFull: upErr, goFull: compact(c.goOut), cause: upErr}}
	case c.goErr != nil:
		return []difference{{probe: probe, kind: "Go error", upstream: compact(upOut), goSide: c.goErr.Error(), upstreamFull: compact(upOut), goFull: c.goErr.Error(), cause: c.goErr.Error()}}
	}
	// Why upstream reads the object as partial, if it does: what decides
	// whether derived fields are spliced in.
	partial := ""
	if r["whole"] != true {
		partial, _ = r["whole_error"].(string)
		partial = "upstream reads it as partial: " + partial
	}
	goOut := stripCarry(c.obj, c.goOut)
	var diffs []difference
	if back, ok := r["read_back"].(map[string]any); ok && back["ok"] != true {
		msg, _ := back["error"].(string)
		d := difference{
			probe: "read back " + short(c.to), kind: "refused",
			upstream: msg, goSide: compact(c.goOut),
			upstreamFull: compact(upOut), goFull: compact(c.goOut),
		}
		if own, _ := r["read_back_own"].(map[string]any); own["ok"] != true {
			// Upstream's own output is refused too: a quirk both share.
			d.kind = "refused, as upstream's own output is"
		}
		diffs = append(diffs, d)
	}
	seenCategory := map[string]bool{}
	walkDiff(nil, upOut, goOut, func(path []string, kind string, up, got any) {
		d := difference{
			probe: probe, path: path, kind: kind,
			upstream: describe(up), goSide: describe(got),
			upstreamFull: compact(upOut), goFull: compact(goOut),
		}
		if derivedFields[strings.Join(path, ".")] && partial != "" {
			// One kind of divergence however many derived fields it shows in.
			d.cause, d.path = partial, []string{"(derived fields)"}
		}
		if !seenCategory[d.category()] {
			seenCategory[d.category()] = true
			diffs = append(diffs, d)
		}
	})
	return diffs
}

// roundTripProbe names the storage round trip's probes.
const roundTripProbe = "storage round trip"

// roundTripDifferences compares, for a v1 write c, upstream's view of the
// object stored by this webhook (ours) with its view of the object its own
// webhook would have stored (theirs): the v1 object its webhook serves
// (this project's carry annotations aside) and the rollout hash its
// controller computes.
func roundTripDifferences(c *probeCase, oursV1, theirsV1, oursHash, theirsHash map[string]any) []difference {
	var diffs []difference
	oursErr, _ := oursV1["error"].(string)
	theirsErr, _ := theirsV1["error"].(string)
	ours, _ := oursV1["object"].(map[string]any)
	theirs, _ := theirsV1["object"].(map[string]any)
	probe := roundTripProbe + " to_v1"
	switch {
	case oursErr != "" && theirsErr != "":
	case oursErr != "" || theirsErr != "":
		diffs = append(diffs, difference{probe: probe, kind: "refused one of the two", upstream: theirsErr, goSide: oursErr,
			upstreamFull: compact(theirs), goFull: compact(ours), cause: oursErr + theirsErr})
	default:
		ours = stripCarry(c.obj, ours)
		seenCategory := map[string]bool{}
		walkDiff(nil, theirs, ours, func(path []string, kind string, up, got any) {
			d := difference{probe: probe, path: path, kind: kind, upstream: describe(up), goSide: describe(got),
				upstreamFull: compact(theirs), goFull: compact(ours)}
			if !seenCategory[d.category()] {
				seenCategory[d.category()] = true
				diffs = append(diffs, d)
			}
		})
	}
	oh, _ := oursHash["hash"].(string)
	th, _ := theirsHash["hash"].(string)
	oe, _ := oursHash["error"].(string)
	te, _ := theirsHash["error"].(string)
	if oh != th || (oe == "") != (te == "") {
		diffs = append(diffs, difference{probe: roundTripProbe + " hash", kind: "different hashes",
			upstream: "hash " + th + " " + te, goSide: "hash " + oh + " " + oe, upstreamFull: th + te, goFull: oh + oe})
	}
	return diffs
}

// derivedFields are spliced in only for an object upstream reads whole.
var derivedFields = map[string]bool{
	"spec.requestRollout":                true,
	"status.requestedRolloutHash":        true,
	"status.lastCompletedRolloutHash":    true,
	"status.lastCompletedRolloutRequest": true,
	"status.resourcesHash":               true,
}

// absent marks a missing field in a difference.
type absent struct{}

func describe(v any) string {
	if _, ok := v.(absent); ok {
		return "(absent)"
	}
	return compact(v)
}

// stripCarry is Go's output without this project's carry annotations (and
// without the annotations or metadata it made only to hold them).
func stripCarry(input, out map[string]any) map[string]any {
	meta, ok := out["metadata"].(map[string]any)
	if !ok {
		return out
	}
	annotations, ok := meta["annotations"].(map[string]any)
	if !ok {
		return out
	}
	// Copies of the maps on the way: Convert's output shares its input's.
	out, meta, annotations = maps.Clone(out), maps.Clone(meta), maps.Clone(annotations)
	out["metadata"], meta["annotations"] = meta, annotations
	for k := range annotations {
		if strings.HasPrefix(k, carryPrefix) {
			delete(annotations, k)
		}
	}
	if len(annotations) > 0 {
		return out
	}
	inMeta, hadMeta := input["metadata"]
	inAnnotations, hadAnnotations := lookupMap(inMeta, "annotations")
	switch {
	case hadAnnotations:
		meta["annotations"] = inAnnotations
	default:
		delete(meta, "annotations")
	}
	// A null metadata is dropped, as upstream drops it.
	if len(meta) == 0 && (!hadMeta || inMeta == nil) {
		delete(out, "metadata")
	}
	return out
}

func lookupMap(v any, key string) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	x, ok := m[key]
	return x, ok
}

// walkDiff reports where up and got differ; numbers compare by value.
func walkDiff(path []string, up, got any, report func(path []string, kind string, up, got any)) {
	at := func(k string) []string { return append(slices.Clone(path), k) }
	switch u := up.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			report(path, "differs", up, got)
			return
		}
		keys := make([]string, 0, len(u)+len(g))
		for k := range u {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := u[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			uv, uok := u[k]
			gv, gok := g[k]
			switch {
			case !gok:
				report(at(k), "only upstream", uv, absent{})
			case !uok:
				report(at(k), "only Go", absent{}, gv)
			default:
				walkDiff(at(k), uv, gv, report)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(u) {
			report(path, "differs", up, got)
			return
		}
		for i := range u {
			walkDiff(append(slices.Clone(path), "["+strconv.Itoa(i)+"]"), u[i], g[i], report)
		}
	case json.Number:
		g, ok := got.(json.Number)
		if !ok || !sameNumber(u, g) {
			report(path, "differs", up, got)
		}
	default:
		if up != got {
			report(path, "differs", up, got)
		}
	}
}

// sameNumber compares by value: upstream's serde_json (arbitrary_precision)
// rewrites some spellings on the way through (-0 as 0, 20000000000000000000
// as 2e19), which the API server reads as the same number.
func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, ok1 := new(big.Rat).SetString(string(a))
	y, ok2 := new(big.Rat).SetString(string(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}

func (c *probeCase) describeInput() string {
	if c.kind == "hash" {
		return compact(c.hashInput)
	}
	return compact(c.obj)
}

// shrink removes parts of the example's input while the same kind of
// divergence remains, to show what it takes.
func shrink(t *testing.T, o *oracle, c *probeCase, category string, deadline time.Time) (*probeCase, difference) {
	if deadline.After(time.Now().Add(shrinkEach)) {
		deadline = time.Now().Add(shrinkEach)
	}
	still := func(input []byte) (*probeCase, difference, bool) {
		cand := newCase(c.kind, input, c.odd)
		cand.prepare(t)
		if cand.skipReason != "" {
			return nil, difference{}, false
		}
		for _, d := range cand.judge(o.batch(t, cand.requests)) {
			if d.category() == category {
				return cand, d, true
			}
		}
		return nil, difference{}, false
	}
	best, diff, ok := still(c.input)
	if !ok {
		return c, difference{probe: "?", upstream: "(no longer reproduces)", goSide: "(no longer reproduces)"}
	}
	root := func() any {
		if best.kind == "hash" {
			return mustDecode(t, mustEncode(t, best.hashInput))
		}
		return mustDecode(t, best.input)
	}
	// One pass over the paths, outermost first; after a removal the pass
	// goes on from the same place in the smaller tree.
	ps := paths(root(), nil)
	for i := 0; i < len(ps) && time.Now().Before(deadline); i++ {
		tree := root()
		if !removeAt(tree, ps[i]) {
			continue
		}
		input := mustEncode(t, tree)
		if best.kind == "hash" {
			// The hash probe reads spec and annotations from an object.
			h := tree.(map[string]any)
			spec, ok := h["spec"].(map[string]any)
			if !ok {
				continue
			}
			obj := map[string]any{"apiVersion": best.from, "kind": conversion.Kind, "spec": spec}
			if a, ok := h["annotations"].(map[string]any); ok {
				obj["metadata"] = map[string]any{"annotations": a}
			}
			input = mustEncode(t, obj)
		}
		if cand, d, ok := still(input); ok && len(cand.describeInput()) < len(best.describeInput()) {
			best, diff = cand, d
			ps = paths(root(), nil)
			i--
		}
	}
	return best, diff
}

// paths lists the map keys and list elements of v, outermost first.
func paths(v any, prefix []any) [][]any {
	var out, deeper [][]any
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(slices.Clone(prefix), k)
			out = append(out, p)
			deeper = append(deeper, paths(x[k], p)...)
		}
	case []any:
		for i := range x {
			p := append(slices.Clone(prefix), i)
			out = append(out, p)
			deeper = append(deeper, paths(x[i], p)...)
		}
	}
	return append(out, deeper...)
}

// removeAt deletes the map key or list element at path from root.
func removeAt(root any, path []any) bool {
	parent, ok := getAt(root, path[:len(path)-1])
	if !ok {
		return false
	}
	switch x := parent.(type) {
	case map[string]any:
		k, _ := path[len(path)-1].(string)
		delete(x, k)
		return true
	case []any:
		j, _ := path[len(path)-1].(int)
		return len(path) > 1 && setAt(root, path[:len(path)-1], slices.Delete(slices.Clone(x), j, j+1))
	}
	return false
}

func getAt(v any, path []any) (any, bool) {
	for _, step := range path {
		switch x := v.(type) {
		case map[string]any:
			k, _ := step.(string)
			v = x[k]
		case []any:
			j, _ := step.(int)
			if j >= len(x) {
				return nil, false
			}
			v = x[j]
		default:
			return nil, false
		}
	}
	return v, true
}

func setAt(root any, path []any, value any) bool {
	parent, ok := getAt(root, path[:len(path)-1])
	if !ok {
		return false
	}
	switch x := parent.(type) {
	case map[string]any:
		k, _ := path[len(path)-1].(string)
		x[k] = value
		return true
	case []any:
		j, _ := path[len(path)-1].(int)
		x[j] = value
		return true
	}
	return false
}

// ---------------------------------------------------------------------------
// The oracle: built once per machine with cargo from Debian's crates.
// ---------------------------------------------------------------------------

func buildOracle(t *testing.T) string {
	t.Helper()
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		t.Skip("cargo is not installed (no cargo on PATH): the upstream oracle is a Rust crate; see test/upstream/oracle/README.md")
	}
	var missing []string
	for _, prefix := range debianCrates {
		matches, _ := filepath.Glob(filepath.Join(debianRegistry, prefix+"*"))
		if len(matches) == 0 {
			missing = append(missing, strings.TrimSuffix(strings.TrimSuffix(prefix, "."), "-1")+" ("+prefix+"*)")
		}
	}
	if len(missing) > 0 {
		t.Skipf("Debian's packaged Rust crates are missing from %s: %s; install them with: apt-get install -y %s",
			debianRegistry, strings.Join(missing, ", "), debianPackages)
	}

	// Build a copy outside the repository: cargo writes Cargo.lock and its
	// target directory next to the crate. Files are rewritten only when they
	// change, so cargo rebuilds only then.
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "orchestratord", "upstream-oracle")
	for _, f := range []string{"Cargo.toml", ".cargo/config.toml", "src/main.rs"} {
		src, err := os.ReadFile(filepath.Join("oracle", f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, src) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	build := func() ([]byte, error) {
		cmd := exec.CommandContext(ctx, cargo, "build", "--offline", "--quiet")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CARGO_TARGET_DIR="+filepath.Join(dir, "target"))
		return cmd.CombinedOutput()
	}
	out, err := build()
	if err != nil && strings.Contains(string(out), "lock file") {
		// Cargo.lock written by another cargo version: resolve again.
		_ = os.Remove(filepath.Join(dir, "Cargo.lock"))
		out, err = build()
	}
	if err != nil {
		text := string(out)
		if strings.Contains(text, "no matching package") || strings.Contains(text, "failed to select a version") {
			t.Skipf("Debian's packaged Rust crates do not satisfy oracle/Cargo.toml (apt-get install -y %s): %s", debianPackages, text)
		}
		t.Fatalf("building the upstream oracle (cargo build --offline in %s): %v\n%s", dir, err, text)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("built the upstream oracle in %v", d.Round(time.Second))
	}
	return filepath.Join(dir, "target", "debug", "upstream-oracle")
}

type oracle struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
	nextID int
}

func startOracle(t *testing.T, bin string) *oracle {
	o := &oracle{cmd: exec.Command(bin)}
	var err error
	if o.stdin, err = o.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := o.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	o.stdout = bufio.NewReaderSize(stdout, 1<<20)
	o.cmd.Stderr = &o.stderr
	if err := o.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.close)
	return o
}

func (o *oracle) close() {
	if o.cmd.ProcessState == nil {
		_ = o.stdin.Close()
		_ = o.cmd.Wait()
	}
}

// cpu is the oracle's CPU time so far (known once it has exited).
func (o *oracle) cpu() time.Duration {
	if o.cmd.ProcessState == nil {
		return 0
	}
	return o.cmd.ProcessState.UserTime() + o.cmd.ProcessState.SystemTime()
}

// batch sends requests (JSON objects) and reads their responses, writing
// while reading.
func (o *oracle) batch(t testing.TB, requests [][]byte) []map[string]any {
	first := o.nextID
	size := 0
	for _, req := range requests {
		size += len(req) + 24
	}
	lines := make([]byte, 0, size)
	for _, req := range requests {
		lines = fmt.Appendf(lines, `{"id":%d,%s`, o.nextID, req[1:])
		lines = append(lines, '\n')
		o.nextID++
	}
	written := make(chan error, 1)
	go func() {
		_, err := o.stdin.Write(lines)
		written <- err
	}()
	responses := make([]map[string]any, 0, len(requests))
	for i := range requests {
		line, err := o.stdout.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the oracle: %v (stderr: %s)", err, o.stderr.String())
		}
		v, err := jsonvalue.Decode(bytes.TrimSpace(line))
		if err != nil {
			t.Fatalf("oracle response %q: %v", line, err)
		}
		resp, _ := v.(map[string]any)
		if id, _ := resp["id"].(json.Number); string(id) != strconv.Itoa(first+i) {
			t.Fatalf("oracle response %s out of order (want id %d)", line, first+i)
		}
		responses = append(responses, resp)
	}
	if err := <-written; err != nil {
		t.Fatalf("writing to the oracle: %v", err)
	}
	return responses
}

func mustEncode(t testing.TB, v any) []byte {
	b, err := jsonvalue.Append(nil, v)
	if err != nil {
		if t == nil {
			panic(err)
		}
		t.Fatal(err)
	}
	return b
}

func mustDecode(t testing.TB, b []byte) any {
	v, err := jsonvalue.Decode(b)
	if err != nil {
		if t == nil {
			panic(err)
		}
		t.Fatal(err)
	}
	return v
}

func compact(v any) string {
	if v == nil {
		return "null"
	}
	b, err := jsonvalue.Append(nil, v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	// Readable: the encoder escapes <, > and & as json.Marshal does.
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(out.String())
}
