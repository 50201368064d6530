package conversion

import (
	"encoding/json"
	"strconv"
	"strings"
)

// objectGenerator turns fuzz bytes into Materialize objects of one version,
// whole or partial. Values come from small pools so that the cases the rules
// distinguish (empty, nil UUID, equal requests, existing annotations,
// promoting) are hit often, with arbitrary strings mixed in.
type objectGenerator struct {
	data []byte
	// foreignCarry adds hand-made conversion annotations, which conversion
	// must survive but cannot be expected to round-trip.
	foreignCarry bool
}

func (g *objectGenerator) byte() byte {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return b
}

func (g *objectGenerator) pick(n int) int { return int(g.byte()) % n }

func (g *objectGenerator) text() string {
	n := g.pick(12)
	if n > len(g.data) {
		n = len(g.data)
	}
	// Strings decoded from JSON are always valid UTF-8.
	s := strings.ToValidUTF8(string(g.data[:n]), "?")
	g.data = g.data[n:]
	return s
}

var uuids = []string{nilUUID, "6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00", "0b0b0b0b-1111-4222-8333-444444444444", ""}

func (g *objectGenerator) str(pool ...string) any {
	if i := g.pick(len(pool) + 2); i < len(pool) {
		return pool[i]
	} else if i == len(pool) {
		return g.text()
	}
	return nil // JSON null
}

// sstr is str without null, for string-only places such as annotations.
func (g *objectGenerator) sstr(pool ...string) string {
	if s, ok := g.str(pool...).(string); ok {
		return s
	}
	return ""
}

func (g *objectGenerator) strMap(keys ...string) any {
	m := map[string]any{}
	for _, k := range keys {
		if g.pick(2) == 0 {
			m[k] = g.sstr("a", "arn:aws:iam::1:role/x")
		}
	}
	if g.pick(3) == 0 {
		m[g.text()] = g.text()
	}
	return m
}

// maybe sets obj[key] from make with probability 3/4 unless partial picks it out.
func (g *objectGenerator) maybe(obj map[string]any, key string, make func() any) {
	if g.pick(4) != 0 {
		obj[key] = make()
	}
}

func (g *objectGenerator) annotations() map[string]any {
	m := map[string]any{}
	if g.pick(2) == 0 {
		m[ForceRolloutAnnotation] = g.sstr("1", "2")
	}
	if g.pick(3) == 0 {
		m["team"] = g.text()
	}
	// Stale or hand-made carry annotations must not break anything.
	if g.foreignCarry && g.pick(3) == 0 {
		m[v1alpha1CarryAnnotation] = g.sstr(`[{"path":["spec","inPlaceRollout"],"value":true}]`, "not json", `[{"path":[]}]`)
	}
	if g.foreignCarry && g.pick(3) == 0 {
		m[v1CarryAnnotation] = g.sstr(`[{"path":["status","requestedRolloutHash"],"value":"h"}]`, "[]")
	}
	return m
}

func (g *objectGenerator) conditions() any {
	reasons := []string{"Applied", "Promoting", "ReadyToPromote"}
	var out []any
	for i := g.pick(3); i > 0; i-- {
		out = append(out, map[string]any{
			"type": []string{"UpToDate", "Other"}[g.pick(2)], "status": "True",
			"reason": reasons[g.pick(len(reasons))], "message": g.text(),
			"lastTransitionTime": "2026-01-01T00:00:00Z",
		})
	}
	return out
}

func (g *objectGenerator) certSpec() any {
	m := map[string]any{"dnsNames": []any{g.text()}}
	if g.pick(2) == 0 {
		m["issuerRef"] = map[string]any{"name": g.text(), "kind": "ClusterIssuer"}
	}
	return m
}

func (g *objectGenerator) commonSpec(spec map[string]any) {
	g.maybe(spec, "environmentdImageRef", func() any { return g.str("mz:v1", "mz:v2") })
	g.maybe(spec, "backendSecretName", func() any { return g.str("backend") })
	g.maybe(spec, "environmentdExtraArgs", func() any { return []any{g.text()} })
	g.maybe(spec, "environmentdExtraEnv", func() any { return []any{map[string]any{"name": "A", "value": g.text()}} })
	g.maybe(spec, "balancerdReplicas", func() any { return json.Number(strconv.Itoa(g.pick(4))) })
	g.maybe(spec, "balancerdResourceRequirements", func() any {
		return map[string]any{"requests": map[string]any{"cpu": "100m"}}
	})
	g.maybe(spec, "environmentdScratchVolumeStorageRequirement", func() any { return g.str("10Gi", "1") })
	g.maybe(spec, "serviceAccountAnnotations", func() any { return g.strMap(IAMRoleAnnotation, "other") })
	g.maybe(spec, "podLabels", func() any { return g.strMap("l") })
	g.maybe(spec, "forceRollout", func() any { return g.str(uuids...) })
	g.maybe(spec, "forcePromote", func() any { return g.str(uuids...) })
	g.maybe(spec, "rolloutStrategy", func() any { return g.str("WaitUntilReady", "ManuallyPromote") })
	g.maybe(spec, "rolloutRequestTimeout", func() any { return g.str("24h", "90m") })
	g.maybe(spec, "enableRbac", func() any { return g.pick(2) == 0 })
	g.maybe(spec, "environmentId", func() any { return g.str(uuids...) })
	g.maybe(spec, "internalCertificateSpec", g.certSpec)
	g.maybe(spec, "consoleExternalCertificateSpec", g.certSpec)
	if g.pick(8) == 0 {
		spec[g.text()] = g.text() // a field no version knows
	}
}

func (g *objectGenerator) base(apiVersion string) map[string]any {
	obj := map[string]any{"apiVersion": apiVersion, "kind": Kind}
	meta := map[string]any{"name": "mz", "namespace": "ns"}
	if a := g.annotations(); len(a) > 0 {
		meta["annotations"] = a
	}
	obj["metadata"] = meta
	return obj
}

func (g *objectGenerator) v1alpha1() map[string]any {
	obj := g.base(V1Alpha1)
	spec := map[string]any{}
	g.commonSpec(spec)
	g.maybe(spec, "requestRollout", func() any { return g.str(uuids...) })
	g.maybe(spec, "inPlaceRollout", func() any { return g.pick(2) == 0 })
	g.maybe(spec, "environmentdIamRoleArn", func() any { return g.str("", "arn:aws:iam::1:role/x", "arn:aws:iam::1:role/y") })
	g.maybe(obj, "spec", func() any { return spec })
	status := map[string]any{}
	g.maybe(status, "resourceId", func() any { return g.str("abc") })
	g.maybe(status, "activeGeneration", func() any { return json.Number(strconv.Itoa(g.pick(3))) })
	g.maybe(status, "lastCompletedRolloutRequest", func() any { return g.str(uuids...) })
	g.maybe(status, "resourcesHash", func() any { return g.str("r1") })
	g.maybe(status, "lastCompletedRolloutHash", func() any { return g.str("h1", "") })
	g.maybe(status, "observedGeneration", func() any { return json.Number("18446744073709551615") })
	g.maybe(status, "conditions", g.conditions)
	g.maybe(obj, "status", func() any { return status })
	return obj
}

func (g *objectGenerator) v1() map[string]any {
	obj := g.base(V1)
	spec := map[string]any{}
	g.commonSpec(spec)
	g.maybe(obj, "spec", func() any { return spec })
	status := map[string]any{}
	g.maybe(status, "resourceId", func() any { return g.str("abc") })
	g.maybe(status, "activeGeneration", func() any { return json.Number(strconv.Itoa(g.pick(3))) })
	g.maybe(status, "lastCompletedRolloutHash", func() any { return g.str("h1", "") })
	g.maybe(status, "requestedRolloutHash", func() any { return g.str("h1", "h2") })
	g.maybe(status, "lastCompletedRolloutEnvironmentdImageRef", func() any { return g.str("mz:v1") })
	g.maybe(status, "conditions", g.conditions)
	g.maybe(obj, "status", func() any { return status })
	return obj
}
