package conversion

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// The rollout hash test vectors. Each expected document was written by hand
// from upstream's types, not produced by this code:
//   - v1::MaterializeSpec (src/cloud-resources/src/crd/materialize.rs) is
//     #[serde(rename_all = "camelCase")] with no skip_serializing_if, so every
//     field is written in declaration order, None as null; forceRollout,
//     rolloutStrategy, rolloutRequestTimeout, authenticatorKind, enableRbac
//     and environmentId are #[serde(default)] (nil UUID, WaitUntilReady,
//     "24h", None, false, nil UUID); generate_rollout_hash sets the balancerd
//     and console fields, forcePromote and the two external certificate
//     specs to None.
//   - EnvVar, EnvVarSource, SecretKeySelector, ObjectFieldSelector,
//     ResourceRequirements, ResourceClaim come from k8s-openapi 0.27 (v1_34):
//     hand-written Serialize impls that skip None and write fields in the
//     alphabetical order of their Rust names; unknown fields are ignored;
//     Quantity is the string as written; maps are BTreeMaps (sorted keys).
//   - MaterializeCertSpec (src/cloud-resources/src/crd.rs) writes None as
//     null except privateKeyAlgorithm/privateKeySize (skipped); kopium's
//     CertificateIssuerRef (group, kind skipped when None; name) and
//     CertificateSecretTemplate (annotations, labels skipped when None).
//   - serde_json escapes only '"', '\\' and control characters; the uuid
//     crate writes lower-case hyphenated UUIDs whatever form it read.
//
// The hex digests were computed from the expected documents with sha256sum,
// outside this code.
var rolloutHashVectors = []struct {
	name        string
	spec        string
	annotations map[string]string
	document    string
	hash        string
}{
	{
		name:     "required fields only",
		spec:     `{"environmentdImageRef":"materialize/environmentd:v26.5.0","backendSecretName":"materialize-backend"}`,
		document: `{"environmentdImageRef":"materialize/environmentd:v26.5.0","environmentdExtraArgs":null,"environmentdExtraEnv":null,"environmentdConnectionRoleArn":null,"environmentdResourceRequirements":null,"environmentdScratchVolumeStorageRequirement":null,"balancerdResourceRequirements":null,"consoleResourceRequirements":null,"balancerdReplicas":null,"consoleReplicas":null,"serviceAccountName":null,"serviceAccountAnnotations":null,"serviceAccountLabels":null,"podAnnotations":null,"podLabels":null,"forcePromote":null,"forceRollout":"00000000-0000-0000-0000-000000000000","rolloutStrategy":"WaitUntilReady","rolloutRequestTimeout":"24h","backendSecretName":"materialize-backend","authenticatorKind":"None","enableRbac":false,"environmentId":"00000000-0000-0000-0000-000000000000","systemParameterConfigmapName":null,"balancerdExternalCertificateSpec":null,"consoleExternalCertificateSpec":null,"internalCertificateSpec":null}`,
		hash:     "7c1cf5e62b3cc15d206e2469f178d0873ad66991463601dc3d6ec16f2e90acd1",
	},
	{
		name: "every field, maps, resources, env vars, certificate",
		spec: `{
			"backendSecretName": "materialize-backend",
			"environmentdImageRef": "materialize/environmentd:v26.5.0",
			"environmentdExtraArgs": ["--log-filter=info", "--x=<a&b>"],
			"environmentdExtraEnv": [
				{"value": "line1\nline2 \"é\" \u0001", "name": "A"},
				{"name": "B", "valueFrom": {"secretKeyRef": {"optional": true, "name": "s", "key": "k"}}, "unknownField": 1},
				{"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v1"}}}
			],
			"environmentdConnectionRoleArn": "arn:aws:iam::1:role/r",
			"environmentdResourceRequirements": {"requests": {"memory": "1000Mi", "cpu": "500m"}, "limits": {"memory": "4Gi", "cpu": "2"}, "claims": [{"name": "gpu"}]},
			"environmentdScratchVolumeStorageRequirement": "10Gi",
			"balancerdResourceRequirements": {"limits": {"cpu": "1"}},
			"consoleResourceRequirements": {"limits": {"cpu": "1"}},
			"balancerdReplicas": 3,
			"consoleReplicas": 1,
			"serviceAccountName": "mz-sa",
			"serviceAccountAnnotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r", "a.example/x": "1"},
			"serviceAccountLabels": {},
			"podAnnotations": {"b": "2", "a": "1"},
			"podLabels": {"team": "data"},
			"forcePromote": "7bd2d4a3-8a57-58e2-a3d2-8b1a1a0b1a0b",
			"forceRollout": "{6F1C8A3E-2B7D-4C1A-9E5F-0A1B2C3D4E5F}",
			"rolloutStrategy": "ManuallyPromote",
			"rolloutRequestTimeout": "2h",
			"authenticatorKind": "Password",
			"enableRbac": true,
			"environmentId": "123456789abcdef0123456789abcdef0",
			"systemParameterConfigmapName": "mz-params",
			"balancerdExternalCertificateSpec": {"dnsNames": ["b.example"]},
			"consoleExternalCertificateSpec": {"dnsNames": ["c.example"]},
			"internalCertificateSpec": {"privateKeyAlgorithm": "Ed25519", "secretTemplate": {"labels": {"l": "v"}}, "issuerRef": {"name": "dns01", "kind": "ClusterIssuer"}, "renewBefore": "360h", "duration": null, "dnsNames": ["mz.internal"]}
		}`,
		document: `{"environmentdImageRef":"materialize/environmentd:v26.5.0","environmentdExtraArgs":["--log-filter=info","--x=<a&b>"],"environmentdExtraEnv":[{"name":"A","value":"line1\nline2 \"é\" \u0001"},{"name":"B","valueFrom":{"secretKeyRef":{"key":"k","name":"s","optional":true}}},{"name":"C","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}}],"environmentdConnectionRoleArn":"arn:aws:iam::1:role/r","environmentdResourceRequirements":{"claims":[{"name":"gpu"}],"limits":{"cpu":"2","memory":"4Gi"},"requests":{"cpu":"500m","memory":"1000Mi"}},"environmentdScratchVolumeStorageRequirement":"10Gi","balancerdResourceRequirements":null,"consoleResourceRequirements":null,"balancerdReplicas":null,"consoleReplicas":null,"serviceAccountName":"mz-sa","serviceAccountAnnotations":{"a.example/x":"1","eks.amazonaws.com/role-arn":"arn:aws:iam::1:role/r"},"serviceAccountLabels":{},"podAnnotations":{"a":"1","b":"2"},"podLabels":{"team":"data"},"forcePromote":null,"forceRollout":"6f1c8a3e-2b7d-4c1a-9e5f-0a1b2c3d4e5f","rolloutStrategy":"ManuallyPromote","rolloutRequestTimeout":"2h","backendSecretName":"materialize-backend","authenticatorKind":"Password","enableRbac":true,"environmentId":"12345678-9abc-def0-1234-56789abcdef0","systemParameterConfigmapName":"mz-params","balancerdExternalCertificateSpec":null,"consoleExternalCertificateSpec":null,"internalCertificateSpec":{"dnsNames":["mz.internal"],"duration":null,"renewBefore":"360h","issuerRef":{"kind":"ClusterIssuer","name":"dns01"},"secretTemplate":{"labels":{"l":"v"}},"privateKeyAlgorithm":"Ed25519"}}`,
		hash:     "8ce1d3d7926fc890771812bfc816a1189939300b20a2c6439f8c83b1ce6fc93f",
	},
	{
		name:        "the force-rollout annotation is appended to the document",
		spec:        `{"environmentdImageRef":"materialize/environmentd:v26.5.0","backendSecretName":"materialize-backend"}`,
		annotations: map[string]string{ForceRolloutAnnotation: "again", "other": "ignored"},
		document:    `{"environmentdImageRef":"materialize/environmentd:v26.5.0","environmentdExtraArgs":null,"environmentdExtraEnv":null,"environmentdConnectionRoleArn":null,"environmentdResourceRequirements":null,"environmentdScratchVolumeStorageRequirement":null,"balancerdResourceRequirements":null,"consoleResourceRequirements":null,"balancerdReplicas":null,"consoleReplicas":null,"serviceAccountName":null,"serviceAccountAnnotations":null,"serviceAccountLabels":null,"podAnnotations":null,"podLabels":null,"forcePromote":null,"forceRollout":"00000000-0000-0000-0000-000000000000","rolloutStrategy":"WaitUntilReady","rolloutRequestTimeout":"24h","backendSecretName":"materialize-backend","authenticatorKind":"None","enableRbac":false,"environmentId":"00000000-0000-0000-0000-000000000000","systemParameterConfigmapName":null,"balancerdExternalCertificateSpec":null,"consoleExternalCertificateSpec":null,"internalCertificateSpec":null}`,
		hash:        "c7a5829c410eb8fcfb965ce7901c0e678984101711fd88c26b33742791c4125f",
	},
}

func TestRolloutHashMatchesUpstream(t *testing.T) {
	for _, v := range rolloutHashVectors {
		t.Run(v.name, func(t *testing.T) {
			spec := mustDecode(t, v.spec)
			doc, err := UpstreamSpecJSON(spec)
			if err != nil {
				t.Fatal(err)
			}
			if string(doc) != v.document {
				t.Fatalf("document differs from upstream's:\n got %s\nwant %s", doc, v.document)
			}
			sum := sha256.Sum256([]byte(v.document + v.annotations[ForceRolloutAnnotation]))
			if hex.EncodeToString(sum[:]) != v.hash {
				t.Fatalf("the vector's digest is wrong: sha256(document) = %x", sum)
			}
			got, err := RolloutHash(spec, v.annotations)
			if err != nil {
				t.Fatal(err)
			}
			if got != v.hash {
				t.Errorf("hash %s, want %s", got, v.hash)
			}
		})
	}
}

func TestRolloutHashIgnoresNonRolloutFields(t *testing.T) {
	base := `{"environmentdImageRef":"mz","backendSecretName":"b"`
	want, err := RolloutHash(mustDecode(t, base+`}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, extra := range []string{
		`"balancerdReplicas":5`, `"consoleReplicas":1`, `"forcePromote":"x"`,
		`"balancerdResourceRequirements":{"limits":{"cpu":"1"}}`, `"consoleResourceRequirements":{}`,
		`"balancerdExternalCertificateSpec":{}`, `"consoleExternalCertificateSpec":{}`, `"notAnUpstreamField":1`,
	} {
		got, err := RolloutHash(mustDecode(t, base+","+extra+`}`), nil)
		if err != nil || got != want {
			t.Errorf("%s changed the hash (err %v)", extra, err)
		}
	}
	// An integer quantity is read as its digits (k8s-openapi 0.27.0).
	asNumber, err := RolloutHash(mustDecode(t, base+`,"environmentdResourceRequirements":{"limits":{"cpu":2}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	asString, _ := RolloutHash(mustDecode(t, base+`,"environmentdResourceRequirements":{"limits":{"cpu":"2"}}}`), nil)
	if asNumber != asString {
		t.Error(`cpu: 2 and cpu: "2" hash differently`)
	}
	for _, changed := range []string{
		`"podLabels":{"a":"b"}`, `"environmentdExtraArgs":[]`, `"rolloutStrategy":"ManuallyPromote"`,
		`"internalCertificateSpec":{}`, `"rolloutRequestTimeout":"24h0m"`,
	} {
		got, err := RolloutHash(mustDecode(t, base+","+changed+`}`), nil)
		if err != nil || got == want {
			t.Errorf("%s did not change the hash (err %v)", changed, err)
		}
	}
}

// A spec upstream's types cannot read has no hash, and the error says where.
func TestRolloutHashRefusesWhatUpstreamCannotRead(t *testing.T) {
	cases := map[string]string{
		`{"backendSecretName":"b"}`: "spec.environmentdImageRef: required",
		`{"environmentdImageRef":"mz","backendSecretName":"b","environmentId":"not-a-uuid"}`:                      "spec.environmentId: must be a UUID",
		`{"environmentdImageRef":"mz","backendSecretName":"b","forceRollout":null}`:                               "spec.forceRollout: null",
		`{"environmentdImageRef":"mz","backendSecretName":"b","podLabels":{"a":1}}`:                               "spec.podLabels.a: must be a string",
		`{"environmentdImageRef":"mz","backendSecretName":"b","environmentdExtraEnv":[{"name":2}]}`:               "spec.environmentdExtraEnv[0].name: must be a string",
		`{"environmentdImageRef":"mz","backendSecretName":"b","internalCertificateSpec":{"issuerRef":{}}}`:        "spec.internalCertificateSpec.issuerRef.name: required",
		`{"environmentdImageRef":"mz","backendSecretName":"b","environmentdScratchVolumeStorageRequirement":0.5}`: "must be an integer",
	}
	for spec, want := range cases {
		_, err := RolloutHash(mustDecode(t, spec), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want an error containing %q, got %v", spec, want, err)
		}
	}
}

// RolloutRequest is the name-based (version 5) UUID of the hash in the OID
// namespace, as uuid.NewSHA1 makes it, for hashes and other strings alike.
func TestRolloutRequestIsUUIDv5(t *testing.T) {
	for _, in := range []string{"", "x", strings.Repeat("a", 64), strings.Repeat("long input ", 20)} {
		want := uuid.NewSHA1(uuid.NameSpaceOID, []byte(in)).String()
		if got := RolloutRequest(in); got != want {
			t.Errorf("RolloutRequest(%q) = %s, want %s", in, got, want)
		}
	}
}

// serde_json escapes only '"', '\\' and control characters, wherever they
// fall in a long string (the writer skips plain text a word at a time).
func TestSerdeStringEscapesOnlyWhatSerdeDoes(t *testing.T) {
	short := map[byte]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\t': `\t`, '\n': `\n`, '\f': `\f`, '\r': `\r`}
	for p := range 20 {
		for c := range 256 {
			s := []byte(strings.Repeat("abcdefghij", 2))
			s[p] = byte(c)
			escaped, ok := short[byte(c)]
			switch {
			case ok:
			case c < 0x20:
				escaped = fmt.Sprintf(`\u%04x`, c)
			default: // as it is: '<', DEL and non-ASCII bytes too
				escaped = string(s[p : p+1])
			}
			want := `"` + string(s[:p]) + escaped + string(s[p+1:]) + `"`
			if got := string(appendSerdeString(nil, string(s))); got != want {
				t.Fatalf("appendSerdeString(%q) = %s, want %s", s, got, want)
			}
		}
	}
}

// A BTreeMap's keys are written in byte order, however many there are
// (past the few the writer sorts on the stack) and in whatever order the
// spec held them.
func TestUpstreamSpecJSONSortsMapKeys(t *testing.T) {
	for _, n := range []int{0, 1, 2, 8, 9, 20} {
		var in, want strings.Builder
		for i := n - 1; i >= 0; i-- {
			fmt.Fprintf(&in, `,"k%02d":"%d"`, i, i)
		}
		for i := range n {
			fmt.Fprintf(&want, `,"k%02d":"%d"`, i, i)
		}
		spec := `{"environmentdImageRef":"mz","backendSecretName":"b","podAnnotations":{` + strings.TrimPrefix(in.String(), ",") + `}}`
		doc, err := UpstreamSpecJSON(mustDecode(t, spec))
		if err != nil {
			t.Fatal(err)
		}
		if wantField := `"podAnnotations":{` + strings.TrimPrefix(want.String(), ",") + `}`; !strings.Contains(string(doc), wantField) {
			t.Errorf("%d keys: the document holds no %s:\n%s", n, wantField, doc)
		}
	}
}
