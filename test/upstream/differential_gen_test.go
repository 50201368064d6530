package upstream_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/materializeinc/orchestratord/pkg/conversion"
)

// The generator of the differential test: Materialize objects of either
// version, whole and partial, from a seeded PRNG. Values come from pools
// that hit what the conversion rules and upstream's serde tell apart (UUID
// spellings, empty and nil values, quantities as strings and numbers,
// promoting conditions, the force-rollout annotation, unknown fields).
//
// About a quarter of the objects may also get values the CRD schema would
// not admit (type errors, nulls in non-nullable fields, UUIDs the uuid
// crate reads but format: uuid refuses, numbers the API server would never
// spell so); such an object is marked odd, so the report can tell the
// divergences the API server can send from those it cannot.

type gen struct {
	r *rand.Rand
	// allowOdd lets this object get values the schema would not admit;
	// odd records that it got one.
	allowOdd, odd bool
}

func num(s string) json.Number { return json.Number(s) }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) pick(xs ...any) any { return xs[g.r.IntN(len(xs))] }

// weird returns one of xs, marking the object odd, when odd values are
// allowed and a p-chance comes up; else ok.
func (g *gen) weird(p float64, ok func() any, xs ...any) any {
	if g.allowOdd && g.chance(p) {
		g.odd = true
		return g.pick(xs...)
	}
	return ok()
}

var baseUUIDs = []string{
	"1e6ef7bc-bff2-4bd4-90dc-eda5697bd0e6",
	"6f1f4a8e-3c2b-4e4f-9a7e-0c4b8d2e1f00",
	"00000000-0000-0000-0000-000000000000",
	conversion.RolloutRequest("0000000000000000000000000000000000000000000000000000000000000000"),
}

func (g *gen) baseUUID() string { return baseUUIDs[g.r.IntN(len(baseUUIDs))] }

// spellUUID writes u as the CRD's format: uuid admits it (any case, with
// or without hyphens, even some of them) or, oddly, as only the uuid crate
// or neither reads it.
func (g *gen) spellUUID(u string) any {
	simple := strings.ReplaceAll(u, "-", "")
	return g.weird(0.25, func() any {
		switch g.r.IntN(9) {
		case 0:
			return strings.ToUpper(u)
		case 1:
			var b strings.Builder
			for i, c := range u {
				if i%2 == 0 {
					c = []rune(strings.ToUpper(string(c)))[0]
				}
				b.WriteRune(c)
			}
			return b.String()
		case 2:
			return simple
		case 3:
			return strings.ToUpper(simple)
		case 4:
			return u[:8] + u[9:] // one hyphen fewer: format: uuid admits it
		default:
			return u
		}
	}, "{"+u+"}", "urn:uuid:"+u, "URN:UUID:"+u, "urn:uuid:"+strings.ToUpper(u), "("+u+")", "["+u+"]",
		" "+u, u+"0", simple[:31], "", "not-a-uuid", nil, num("7"), true)
}

func (g *gen) uuid() any { return g.spellUUID(g.baseUUID()) }

// hash64 is a 64-hex-digit value like a rollout hash.
func (g *gen) hash64() string {
	sum := sha256.Sum256([]byte(strconv.Itoa(g.r.IntN(4))))
	return hex.EncodeToString(sum[:])
}

func (g *gen) text() any {
	return g.pick("", "a", "materialize", "x<&>\"\\\n\u2028é\u0001", " spaced ", "🙂", "Ωmega", strings.Repeat("long", 20))
}

func (g *gen) str() any { return g.weird(0.1, g.text, nil, num("1"), true, []any{}, map[string]any{}) }

// optStr is an Option<String>: null is fine for serde, not for the schema.
func (g *gen) optStr() any { return g.weird(0.15, g.text, nil, num("5"), false) }

func (g *gen) boolean() any {
	return g.weird(0.15, func() any { return g.chance(0.5) }, nil, "true", num("1"))
}

func (g *gen) int32() any {
	return g.weird(0.3, func() any { return num(g.pick("0", "1", "2", "3", "-1", "2147483647").(string)) },
		num("2147483648"), num("-2147483649"), num("1.5"), num("2.0"), num("1e1"), num("-0"), "2", nil)
}

func (g *gen) uint64() any {
	return g.weird(0.25, func() any { return num(g.pick("0", "1", "7", "9223372036854775807", "18446744073709551615").(string)) },
		num("-1"), num("1.5"), num("18446744073709551616"), num("3.0"), num("-0"), "3", nil)
}

func (g *gen) quantity() any {
	return g.weird(0.35, func() any {
		return g.pick("1Gi", "500m", "1.5", "+1", ".5", "1e3", "4096Mi", "0", "2", "100M",
			num("2"), num("0"), num("-1"), num("9223372036854775807"))
	}, "", "garbage", " 1Gi", num("9223372036854775808"), num("18446744073709551615"), num("18446744073709551616"),
		num("1.5"), num("2.0"), num("1e3"), num("-0"), nil, true)
}

func (g *gen) stringList() any {
	return g.weird(0.15, func() any {
		return g.pick([]any{}, []any{"--log-filter=info"}, []any{"a", "", "x<&>"})
	}, []any{"a", num("1")}, []any{nil}, "--flag", map[string]any{})
}

func (g *gen) stringMap() any {
	return g.weird(0.15, func() any {
		switch g.r.IntN(5) {
		case 0:
			return map[string]any{}
		case 1:
			return map[string]any{"a": "b"}
		case 2:
			return map[string]any{"z": "1", "é": "2", "A": "", "a.b/c": "x<&>"}
		default:
			return map[string]any{"team": "data"}
		}
	}, map[string]any{"k": nil}, map[string]any{"k": num("1")}, "notamap", []any{})
}

// serviceAccountAnnotations, sometimes with the IAM role key already set.
func (g *gen) saAnnotations() any {
	if g.chance(0.35) {
		m := map[string]any{conversion.IAMRoleAnnotation: g.pick("arn:aws:iam::1:role/existing", "").(string)}
		if g.chance(0.5) {
			m["azure.workload.identity/client-id"] = "c"
		}
		return m
	}
	return g.stringMap()
}

func (g *gen) roleArn() any {
	return g.weird(0.2, func() any { return g.pick("arn:aws:iam::123456789012:role/mz", "", "arn:aws:iam::1:role/existing") },
		nil, num("5"), map[string]any{})
}

func (g *gen) envVar() any {
	v := map[string]any{"name": g.pick("A", "B_2", "", "x<&>")}
	switch g.r.IntN(8) {
	case 0:
		v["value"] = g.text()
	case 1:
		v["valueFrom"] = map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k", "optional": true}}
	case 2:
		v["valueFrom"] = map[string]any{"configMapKeyRef": map[string]any{"key": "k"}}
	case 3:
		v["valueFrom"] = map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name", "apiVersion": "v1"}}
	case 4:
		v["valueFrom"] = map[string]any{"resourceFieldRef": map[string]any{"resource": "limits.memory", "divisor": g.quantity(), "containerName": "c"}}
	case 5:
		v["valueFrom"] = map[string]any{"fileKeyRef": map[string]any{"key": "k", "path": "p", "volumeName": "v"}}
	case 6:
		v["valueFrom"] = map[string]any{}
		v["value"] = ""
	}
	if g.chance(0.1) {
		v["unknownField"] = num("1")
	}
	if g.chance(0.1) {
		delete(v, "name") // k8s-openapi reads a missing name as ""
	}
	return g.weird(0.1, func() any { return v }, map[string]any{"name": nil, "value": "v"}, map[string]any{"name": "A", "value": num("1")},
		[]any{"A"}, "A=1", map[string]any{"name": "A", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"optional": "yes"}}})
}

func (g *gen) envList() any {
	return g.weird(0.05, func() any {
		var l []any
		for range g.r.IntN(4) {
			l = append(l, g.envVar())
		}
		if l == nil {
			l = []any{}
		}
		return l
	}, "A=1", map[string]any{})
}

func (g *gen) quantities() any {
	m := map[string]any{}
	for _, k := range []string{"cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"} {
		if g.chance(0.4) {
			m[k] = g.quantity()
		}
	}
	return m
}

func (g *gen) resources() any {
	r := map[string]any{}
	if g.chance(0.5) {
		r["limits"] = g.quantities()
	}
	if g.chance(0.5) {
		r["requests"] = g.quantities()
	}
	if g.chance(0.15) {
		r["claims"] = g.pick([]any{}, []any{map[string]any{"name": "c"}}, []any{map[string]any{"name": "c", "request": "r"}, map[string]any{}})
	}
	if g.chance(0.1) {
		r["unknownField"] = map[string]any{"a": num("1")}
	}
	return g.weird(0.1, func() any { return r }, map[string]any{"limits": nil}, map[string]any{"limits": "x"},
		map[string]any{"requests": map[string]any{"cpu": nil}}, map[string]any{"claims": []any{map[string]any{"name": num("1")}}}, []any{}, "1Gi")
}

func (g *gen) certSpec() any {
	c := map[string]any{}
	if g.chance(0.6) {
		c["dnsNames"] = g.pick([]any{}, []any{"a.example"}, []any{"a.example", "*.b.example"})
	}
	if g.chance(0.7) {
		ref := map[string]any{"name": g.pick("ca", "")}
		if g.chance(0.5) {
			ref["kind"] = g.pick("Issuer", "ClusterIssuer")
		}
		if g.chance(0.3) {
			ref["group"] = "cert-manager.io"
		}
		c["issuerRef"] = ref
	}
	if g.chance(0.3) {
		c["duration"] = "2160h"
	}
	if g.chance(0.3) {
		c["renewBefore"] = "360h"
	}
	if g.chance(0.3) {
		c["secretTemplate"] = g.pick(map[string]any{}, map[string]any{"annotations": map[string]any{"a": "b"}}, map[string]any{"labels": map[string]any{}, "annotations": map[string]any{}})
	}
	if g.chance(0.3) {
		c["privateKeyAlgorithm"] = g.pick("RSA", "ECDSA", "Ed25519")
	}
	if g.chance(0.3) {
		c["privateKeySize"] = num(g.pick("2048", "256", "0").(string))
	}
	return g.weird(0.3, func() any { return c },
		map[string]any{"issuerRef": map[string]any{}}, map[string]any{"issuerRef": map[string]any{"kind": "Issuer"}},
		map[string]any{"issuerRef": map[string]any{"name": nil}}, map[string]any{"privateKeyAlgorithm": "rsa"},
		map[string]any{"privateKeyAlgorithm": nil}, map[string]any{"privateKeySize": "2048"}, map[string]any{"privateKeySize": num("1.5")},
		map[string]any{"privateKeySize": nil, "dnsNames": nil, "duration": nil}, map[string]any{"secretTemplate": map[string]any{"labels": nil}},
		map[string]any{"dnsNames": []any{num("1")}}, "cert", []any{})
}

func (g *gen) strategy() any {
	return g.weird(0.15, func() any { return g.pick("WaitUntilReady", "ManuallyPromote", "ImmediatelyPromoteCausingDowntime") },
		"Bogus", "waitUntilReady", nil, map[string]any{"WaitUntilReady": nil})
}

func (g *gen) authKind() any {
	return g.weird(0.15, func() any { return g.pick("None", "Password", "Sasl", "Frontegg", "Oidc") }, "none", "", nil)
}

func (g *gen) timeout() any {
	return g.weird(0.15, func() any { return g.pick("24h", "90m", "1h 30m", "", "garbage") }, nil, num("5"))
}

// alphaForcePromote is v1alpha1's forcePromote: a String, "" by default,
// the nil UUID or "" meaning "not force promoting".
func (g *gen) alphaForcePromote(requestRollout any) any {
	return g.weird(0.15, func() any {
		opts := []any{"", "00000000-0000-0000-0000-000000000000", "00000000000000000000000000000000",
			"00000000-0000-0000-0000-000000000000 ", g.baseUUID(), g.hash64()}
		if s, ok := requestRollout.(string); ok {
			opts = append(opts, s, s)
		}
		return g.pick(opts...)
	}, nil, num("0"), false)
}

// v1ForcePromote is v1's forcePromote, an Option<String>.
func (g *gen) v1ForcePromote() any {
	return g.weird(0.15, func() any {
		return g.pick("", "00000000-0000-0000-0000-000000000000", g.hash64(), g.baseUUID())
	}, nil, num("1"))
}

func (g *gen) unknownValue() any {
	return g.weird(0.3, func() any {
		return g.pick(map[string]any{"a": num("1")}, "x", []any{}, map[string]any{}, num("1.50"), num("1E3"))
	}, nil, num("-0"), num("20000000000000000000"), num("18446744073709551616"), num("1e400"), num("-0.0"))
}

var timestamps = []any{"2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123456Z", "2024-05-01T14:00:00+02:00"}

func (g *gen) timestamp() any {
	return g.weird(0.1, func() any { return g.pick(timestamps...) }, "", "yesterday", "2024-05-01", "2024-05-01T12:00:00", nil, num("0"))
}

func (g *gen) condition() any {
	c := map[string]any{
		"type":               g.pick("UpToDate", "UpToDate", "UpToDate", "Ready", "Other"),
		"status":             g.pick("True", "False", "Unknown"),
		"reason":             g.pick("Applied", "Promoting", "ReadyToPromote", "Applying", ""),
		"message":            g.pick("", "ok"),
		"lastTransitionTime": g.timestamp(),
	}
	if g.chance(0.3) {
		c["observedGeneration"] = num(g.pick("1", "3").(string))
	}
	if g.allowOdd && g.chance(0.1) {
		g.odd = true
		switch g.r.IntN(4) {
		case 0:
			delete(c, "lastTransitionTime")
		case 1:
			c["reason"] = nil
		case 2:
			delete(c, "type")
		default:
			c["observedGeneration"] = num("1.5")
		}
	}
	return c
}

func (g *gen) conditions() any {
	return g.weird(0.05, func() any {
		l := []any{}
		for range g.r.IntN(3) {
			l = append(l, g.condition())
		}
		return l
	}, nil, map[string]any{}, "UpToDate")
}

func (g *gen) metadata() map[string]any {
	m := map[string]any{}
	if g.chance(0.9) {
		m["name"] = "mz"
	}
	if g.chance(0.8) {
		m["namespace"] = "materialize"
	}
	if g.chance(0.5) {
		m["uid"] = "8a7f0e2c-1d2b-4c3d-9e4f-5a6b7c8d9e0f"
		m["resourceVersion"] = "12345"
		m["generation"] = g.weird(0.2, func() any { return num("3") }, "3", num("1.5"), nil)
		m["creationTimestamp"] = g.weird(0.2, func() any { return g.pick(timestamps...) }, "garbage", nil)
	}
	if g.chance(0.15) {
		m["managedFields"] = []any{map[string]any{
			"manager": "kubectl", "operation": "Apply", "apiVersion": "materialize.cloud/v1",
			"time": g.timestamp(), "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{}},
		}}
	}
	if g.chance(0.1) {
		m["finalizers"] = []any{"orchestratord.materialize.cloud/materialize"}
	}
	if g.chance(0.2) {
		m["labels"] = g.stringMap()
	}
	if g.chance(0.5) {
		a := map[string]any{}
		if g.chance(0.6) {
			a[conversion.ForceRolloutAnnotation] = g.pick("", "1", "a4b56cbb-a13e-4f95-8a9d-425c9ba28576", "x<&>")
		}
		if g.chance(0.3) {
			a["example.com/note"] = "n"
		}
		m["annotations"] = g.weird(0.05, func() any { return a },
			nil, map[string]any{"k": num("1")}, map[string]any{conversion.ForceRolloutAnnotation: nil})
	}
	return m
}

func (g *gen) alphaStatus(requestRollout any) map[string]any {
	s := map[string]any{
		"resourceId":       g.pick("", "abc123"),
		"activeGeneration": g.uint64(),
		"resourcesHash":    g.pick("", "r", g.hash64()),
		"conditions":       g.conditions(),
	}
	switch {
	case g.chance(0.5):
		// The request just completed, spelled as it comes.
		if base, ok := requestRollout.(string); ok {
			if u := canonicalUUID(base); u != "" {
				s["lastCompletedRolloutRequest"] = g.spellUUID(u)
				break
			}
		}
		s["lastCompletedRolloutRequest"] = g.uuid()
	case g.chance(0.8):
		s["lastCompletedRolloutRequest"] = g.uuid()
	}
	if g.chance(0.5) {
		s["lastCompletedRolloutEnvironmentdImageRef"] = g.optStr()
	}
	if g.chance(0.35) {
		s["lastCompletedRolloutHash"] = g.weird(0.2, func() any { return g.pick(g.hash64(), "") }, nil)
	}
	g.statusExtras(s, "requestedRolloutHash")
	return s
}

func (g *gen) v1Status(hash string) map[string]any {
	s := map[string]any{
		"resourceId":       g.pick("", "abc123"),
		"activeGeneration": g.uint64(),
		"conditions":       g.conditions(),
	}
	if g.chance(0.5) {
		s["lastCompletedRolloutEnvironmentdImageRef"] = g.optStr()
	}
	if g.chance(0.6) {
		s["lastCompletedRolloutHash"] = g.weird(0.2, func() any {
			if hash != "" && g.chance(0.5) {
				return hash
			}
			return g.pick(g.hash64(), "")
		}, nil)
	}
	if g.chance(0.6) {
		s["requestedRolloutHash"] = g.weird(0.2, func() any {
			if hash != "" && g.chance(0.5) {
				return hash
			}
			return g.hash64()
		}, nil)
	}
	g.statusExtras(s, "lastCompletedRolloutRequest", "resourcesHash")
	return s
}

// statusExtras adds fields neither upstream version knows: this project's
// own status fields and, oddly, the other version's.
func (g *gen) statusExtras(s map[string]any, otherVersion ...string) {
	if g.chance(0.15) {
		s["observedGeneration"] = num(g.pick("1", "4").(string))
	}
	if g.chance(0.1) {
		s["rollout"] = map[string]any{"request": g.baseUUID(), "generation": num("2"), "startedAt": timestamps[0]}
	}
	if g.chance(0.05) {
		s["someFutureField"] = g.unknownValue()
	}
	if g.allowOdd && g.chance(0.1) {
		g.odd = true
		s[otherVersion[g.r.IntN(len(otherVersion))]] = g.pick(g.hash64(), g.baseUUID())
	}
}

func (g *gen) spec(alpha bool) map[string]any {
	s := map[string]any{
		"environmentdImageRef": g.weird(0.05, func() any {
			return g.pick("materialize/environmentd:v26.0.0", "materialize/environmentd:v26.5.1", "registry.local:5000/environmentd@sha256:ab", "")
		}, nil, num("26")),
		"backendSecretName": g.weird(0.05, func() any { return g.pick("materialize-backend", "") }, nil),
	}
	opt := func(key string, p float64, value func() any) {
		if g.chance(p) {
			s[key] = value()
		}
	}
	opt("environmentdExtraArgs", 0.25, g.stringList)
	opt("environmentdExtraEnv", 0.3, g.envList)
	opt("environmentdConnectionRoleArn", 0.2, g.optStr)
	opt("environmentdResourceRequirements", 0.4, g.resources)
	opt("environmentdScratchVolumeStorageRequirement", 0.25, g.quantity)
	opt("balancerdResourceRequirements", 0.2, g.resources)
	opt("consoleResourceRequirements", 0.2, g.resources)
	opt("balancerdReplicas", 0.2, g.int32)
	opt("consoleReplicas", 0.2, g.int32)
	opt("serviceAccountName", 0.2, g.optStr)
	opt("serviceAccountAnnotations", 0.35, g.saAnnotations)
	opt("serviceAccountLabels", 0.2, g.stringMap)
	opt("podAnnotations", 0.2, g.stringMap)
	opt("podLabels", 0.2, g.stringMap)
	if alpha {
		opt("requestRollout", 0.85, g.uuid)
		opt("forcePromote", 0.5, func() any { return g.alphaForcePromote(s["requestRollout"]) })
		opt("inPlaceRollout", 0.2, g.boolean)
		opt("environmentdIamRoleArn", 0.35, g.roleArn)
	} else {
		opt("forcePromote", 0.35, g.v1ForcePromote)
		if g.allowOdd && g.chance(0.05) {
			// v1alpha1's fields are unknown to v1.
			g.odd = true
			s[g.pick("requestRollout", "inPlaceRollout", "environmentdIamRoleArn").(string)] = g.pick(g.baseUUID(), true, "arn")
		}
	}
	opt("forceRollout", 0.4, g.uuid)
	opt("rolloutStrategy", 0.5, g.strategy)
	opt("rolloutRequestTimeout", 0.4, g.timeout)
	opt("authenticatorKind", 0.4, g.authKind)
	opt("enableRbac", 0.3, g.boolean)
	opt("environmentId", 0.5, g.uuid)
	opt("systemParameterConfigmapName", 0.2, g.optStr)
	opt("balancerdExternalCertificateSpec", 0.15, g.certSpec)
	opt("consoleExternalCertificateSpec", 0.1, g.certSpec)
	opt("internalCertificateSpec", 0.2, g.certSpec)
	opt("someFutureField", 0.08, g.unknownValue)
	return s
}

// object generates one Materialize of the given version: whole, or made
// partial the ways server-side apply and odd clients do.
func (g *gen) object(apiVersion string) map[string]any {
	alpha := apiVersion == conversion.V1Alpha1
	obj := map[string]any{"apiVersion": apiVersion, "kind": conversion.Kind, "metadata": g.metadata()}
	spec := g.spec(alpha)
	obj["spec"] = spec
	if g.chance(0.75) {
		if alpha {
			obj["status"] = g.alphaStatus(spec["requestRollout"])
		} else {
			var annotations map[string]string
			if a, ok := obj["metadata"].(map[string]any)["annotations"].(map[string]any); ok {
				annotations = map[string]string{}
				for k, v := range a {
					if s, ok := v.(string); ok {
						annotations[k] = s
					}
				}
			}
			hash, _ := conversion.RolloutHash(spec, annotations)
			obj["status"] = g.v1Status(hash)
		}
	}
	if g.chance(0.35) {
		g.partial(obj)
	}
	if g.allowOdd && g.chance(0.05) {
		g.odd = true
		switch g.r.IntN(3) {
		case 0:
			obj["spec"] = nil
		case 1:
			obj["status"] = nil
		default:
			obj["metadata"] = nil
		}
	}
	if g.chance(0.03) {
		obj["someTopLevelField"] = true
	}
	return obj
}

// partial drops fields as a field manager's subset of an object lacks them.
func (g *gen) partial(obj map[string]any) {
	dropSome := func(m map[string]any, p float64) {
		for _, k := range slices.Sorted(maps.Keys(m)) { // the seed decides, not map order
			if g.chance(p) {
				delete(m, k)
			}
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	status, _ := obj["status"].(map[string]any)
	switch g.r.IntN(7) {
	case 0: // a spec field manager's subset: no required fields
		delete(spec, "environmentdImageRef")
		delete(spec, "backendSecretName")
		dropSome(spec, 0.5)
	case 1:
		dropSome(spec, 0.3)
	case 2: // the status manager's subset
		delete(obj, "spec")
	case 3:
		if status != nil {
			dropSome(status, 0.4)
		}
	case 4:
		delete(obj, "metadata")
	case 5:
		delete(obj, "status")
		dropSome(spec, 0.2)
	default:
		obj["spec"] = map[string]any{}
	}
}

// canonicalUUID is u lower-cased and hyphenated when it is one of the
// generator's base UUIDs in any spelling the schema admits, else "".
func canonicalUUID(u string) string {
	simple := strings.ToLower(strings.ReplaceAll(u, "-", ""))
	for _, base := range baseUUIDs {
		if strings.ReplaceAll(base, "-", "") == simple {
			return base
		}
	}
	return ""
}
