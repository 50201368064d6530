package conversion

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/google/uuid"

	"github.com/materializeinc/orchestratord/pkg/mzuuid"
)

// ForceRolloutAnnotation's value goes into the rollout hash, so changing it
// rolls out a new generation without touching the spec.
const ForceRolloutAnnotation = "materialize.cloud/force-rollout"

// RolloutHash is upstream orchestratord's rollout hash of a v1 Materialize
// (generate_rollout_hash in upstream's crd/materialize.rs), byte for byte:
// SHA-256 of the spec as serde_json writes upstream's Rust v1 MaterializeSpec
// with the fields that need no new generation set to None, followed by the
// force-rollout annotation's value when present. Being identical is what
// lets a cluster switch operators without a rollout: the same spec maps to
// the same requestRollout under both.
//
// spec is the v1 spec as decoded JSON. The error says why upstream could not
// read the spec either (a missing required field, a malformed UUID, a value
// of the wrong type); such a spec has no hash.
func RolloutHash(spec map[string]any, annotations map[string]string) (string, error) {
	force, forced := annotations[ForceRolloutAnnotation]
	return hashSpec(spec, force, forced)
}

// serdeDocs holds the buffers hashed documents are written into: every
// conversion hashes one, and drops it at once.
var serdeDocs = sync.Pool{New: func() any { return new([]byte) }}

func hashSpec(spec map[string]any, force string, forced bool) (string, error) {
	buf := serdeDocs.Get().(*[]byte)
	doc, err := appendUpstreamSpecJSON((*buf)[:0], spec)
	defer func() {
		// A buffer grown by an outsized spec is not kept for the next.
		if cap(doc) <= 64<<10 {
			*buf = doc[:0]
			serdeDocs.Put(buf)
		}
	}()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(doc)
	if forced {
		_, _ = io.WriteString(h, force)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])), nil
}

// UpstreamSpecJSON is the document RolloutHash hashes. serde_json writes
// every field of the Rust struct in declaration order: an absent Option as
// null, an absent #[serde(default)] field as its default. Nested Kubernetes
// types (k8s-openapi) and cert-manager types (kopium) omit absent fields
// instead, and k8s-openapi writes fields in the alphabetical order of their
// Rust names. Fields upstream's types do not have are dropped, as serde
// ignores them.
func UpstreamSpecJSON(spec map[string]any) ([]byte, error) {
	doc, err := appendUpstreamSpecJSON(nil, spec)
	if err != nil {
		return nil, err
	}
	return doc, nil
}

func appendUpstreamSpecJSON(buf []byte, spec map[string]any) ([]byte, error) {
	// The stacks are as deep as the spec.
	w := &serdeWriter{buf: buf, root: "spec.", path: make([]string, 0, 8), comma: make([]bool, 0, 8)}
	w.object(func() {
		w.requiredString(spec, "environmentdImageRef")
		w.option(spec, "environmentdExtraArgs", w.strings)
		w.option(spec, "environmentdExtraEnv", w.list(w.envVar))
		w.option(spec, "environmentdConnectionRoleArn", w.string)
		w.option(spec, "environmentdResourceRequirements", w.resourceRequirements)
		w.option(spec, "environmentdScratchVolumeStorageRequirement", w.quantity)
		// Cleared by upstream before hashing: they do not change a
		// generation, but upstream's types must read them all the same.
		w.cleared(spec, "balancerdResourceRequirements", w.resourceRequirements)
		w.cleared(spec, "consoleResourceRequirements", w.resourceRequirements)
		w.cleared(spec, "balancerdReplicas", w.int32)
		w.cleared(spec, "consoleReplicas", w.int32)
		w.option(spec, "serviceAccountName", w.string)
		w.option(spec, "serviceAccountAnnotations", w.stringMap)
		w.option(spec, "serviceAccountLabels", w.stringMap)
		w.option(spec, "podAnnotations", w.stringMap)
		w.option(spec, "podLabels", w.stringMap)
		w.cleared(spec, "forcePromote", w.string)
		w.defaulted(spec, "forceRollout", nilUUID, w.uuid)
		w.defaulted(spec, "rolloutStrategy", "WaitUntilReady", w.enum(rolloutStrategies...))
		w.defaulted(spec, "rolloutRequestTimeout", "24h", w.string)
		w.requiredString(spec, "backendSecretName")
		w.defaulted(spec, "authenticatorKind", "None", w.enum(authenticatorKinds...))
		w.defaulted(spec, "enableRbac", false, w.bool)
		w.defaulted(spec, "environmentId", nilUUID, w.uuid)
		w.option(spec, "systemParameterConfigmapName", w.string)
		w.cleared(spec, "balancerdExternalCertificateSpec", w.certSpec)
		w.cleared(spec, "consoleExternalCertificateSpec", w.certSpec)
		w.option(spec, "internalCertificateSpec", w.certSpec)
	})
	return w.buf, w.err
}

// serdeWriter writes JSON as serde_json's compact serializer does. The
// first error sticks and stops further output; path names the field it is
// in, for the error.
type serdeWriter struct {
	buf   []byte
	root  string // where path starts, for errors
	err   error
	path  []string
	comma []bool // per open object or array: whether a value was written
}

func (w *serdeWriter) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%s%s: %s", w.root, joinPath(w.path), fmt.Sprintf(format, args...))
	}
}

// joinPath names a field for an error; its keys may be a client's (a map's
// keys), so each is cut (echo).
func joinPath(path []string) string {
	out := ""
	for i, p := range path {
		if i > 0 && (p == "" || p[0] != '[') {
			out += "."
		}
		out += echo(p)
	}
	return out
}

func (w *serdeWriter) separate() {
	if n := len(w.comma); n > 0 {
		if w.comma[n-1] {
			w.buf = append(w.buf, ',')
		}
		w.comma[n-1] = true
	}
}

func (w *serdeWriter) object(body func()) {
	w.separate()
	w.buf = append(w.buf, '{')
	w.comma = append(w.comma, false)
	body()
	w.comma = w.comma[:len(w.comma)-1]
	w.buf = append(w.buf, '}')
}

// field writes a key; the value written next is not separated from it.
func (w *serdeWriter) field(key string) {
	w.separate()
	w.buf = appendSerdeString(w.buf, key)
	w.buf = append(w.buf, ':')
	w.comma = append(w.comma, false) // the value is the first "element" after the colon
	w.path = append(w.path, key)
}

func (w *serdeWriter) endField() {
	w.comma = w.comma[:len(w.comma)-1]
	w.path = w.path[:len(w.path)-1]
}

// nullField writes key: null, an Option that is None.
func (w *serdeWriter) nullField(key string) {
	w.field(key)
	w.separate()
	w.buf = append(w.buf, "null"...)
	w.endField()
}

// option writes an Option<T> field of a serde-derived struct: null when
// absent or null.
func (w *serdeWriter) option(obj map[string]any, key string, write func(any)) {
	v := obj[key]
	if v == nil {
		w.nullField(key)
		return
	}
	w.field(key)
	write(v)
	w.endField()
}

// defaulted writes a #[serde(default)] field: its default when absent.
// Present as null it cannot be read (serde only defaults a missing field).
func (w *serdeWriter) defaulted(obj map[string]any, key string, def any, write func(any)) {
	v, ok := obj[key]
	w.field(key)
	switch {
	case !ok:
		write(def)
	case v == nil:
		w.fail("null is not a value")
	default:
		write(v)
	}
	w.endField()
}

// cleared writes an Option field upstream sets to None before hashing:
// null, once the value has been read as upstream's type reads it (and its
// output dropped).
func (w *serdeWriter) cleared(obj map[string]any, key string, read func(any)) {
	mark, top := len(w.buf), w.comma[len(w.comma)-1]
	w.option(obj, key, read)
	w.buf, w.comma[len(w.comma)-1] = w.buf[:mark], top
	w.nullField(key)
}

func (w *serdeWriter) requiredString(obj map[string]any, key string) {
	v, ok := obj[key]
	w.field(key)
	if !ok || v == nil {
		w.fail("required")
	} else {
		w.string(v)
	}
	w.endField()
}

// omitting writes the fields of a k8s-openapi or kopium struct, which skip
// absent ones; fields are given in the order the struct serializes them.
func (w *serdeWriter) omitting(v any, fields ...structField) {
	obj, ok := v.(map[string]any)
	if !ok {
		w.fail("must be an object")
		return
	}
	w.object(func() {
		for _, f := range fields {
			val := obj[f.key]
			switch {
			case f.required && val == nil:
				// k8s-openapi reads a missing required string as "" and
				// always writes it.
				w.field(f.key)
				w.string("")
				w.endField()
			case val == nil:
			default:
				w.field(f.key)
				f.write(val)
				w.endField()
			}
		}
	})
}

type structField struct {
	key      string
	required bool
	write    func(any)
}

func (w *serdeWriter) string(v any) {
	s, ok := v.(string)
	if !ok {
		w.fail("must be a string")
		return
	}
	w.separate()
	w.buf = appendSerdeString(w.buf, s)
}

// quantity is k8s-openapi 0.27.0's Quantity: a string as written (not the
// canonical form Go's resource.Quantity would print), or an integer, which
// the CRD's int-or-string schema stores as a JSON number and k8s-openapi
// reads as its decimal digits; it refuses any other number.
func (w *serdeWriter) quantity(v any) {
	switch n := v.(type) {
	case string:
		w.string(n)
	case json.Number:
		// An integer, i64 or u64 as serde_json reads it, written as Rust
		// formats it ("-0" is 0); a fraction or an exponent is a float,
		// which Quantity refuses.
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			w.string(strconv.FormatInt(i, 10))
		} else if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
			w.string(strconv.FormatUint(u, 10))
		} else {
			w.fail("a quantity number must be an integer")
		}
	case int64:
		w.string(strconv.FormatInt(n, 10))
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			w.fail("a quantity number must be an integer")
			return
		}
		w.string(strconv.FormatInt(int64(n), 10))
	default:
		w.fail("must be a quantity")
	}
}

// The unit variants of upstream's enums (serde names).
var (
	rolloutStrategies    = []string{"WaitUntilReady", "ManuallyPromote", "ImmediatelyPromoteCausingDowntime"}
	authenticatorKinds   = []string{"Frontegg", "Password", "Sasl", "Oidc", "None"}
	privateKeyAlgorithms = []string{"RSA", "ECDSA", "Ed25519"}
)

// enum reads a serde-derived enum of unit variants: the variant's name, or
// serde's externally tagged form {"Name": null}; it writes the name.
func (w *serdeWriter) enum(variants ...string) func(any) {
	return func(v any) {
		name, ok := v.(string)
		if m, isMap := v.(map[string]any); isMap && len(m) == 1 {
			for k, inner := range m {
				name, ok = k, inner == nil
			}
		}
		if !ok || !slices.Contains(variants, name) {
			w.fail("must be one of %v", variants)
			return
		}
		w.string(name)
	}
}

func (w *serdeWriter) bool(v any) {
	b, ok := v.(bool)
	if !ok {
		w.fail("must be a boolean")
		return
	}
	w.separate()
	w.buf = strconv.AppendBool(w.buf, b)
}

func (w *serdeWriter) int64(v any) {
	n, ok := integer(v, math.MinInt64, math.MaxInt64)
	if !ok {
		w.fail("must be an integer")
		return
	}
	w.separate()
	w.buf = strconv.AppendInt(w.buf, n, 10)
}

// integer reads v as serde_json reads an integer type: digits with an
// optional minus sign (serde_json reads "1.0" or "1e3" as a float, which no
// integer type accepts), within min..max.
func integer(v any, min, max int64) (int64, bool) {
	var n int64
	switch x := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, false
		}
		n = i
	case int64:
		n = x
	case int:
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		n = int64(x)
	default:
		return 0, false
	}
	return n, n >= min && n <= max
}

// int32 is an i32 as serde reads one: an integer in range, never a
// fraction or an exponent.
func (w *serdeWriter) int32(v any) {
	n, ok := integer(v, math.MinInt32, math.MaxInt32)
	if !ok {
		w.fail("must be a 32-bit integer")
		return
	}
	w.separate()
	w.buf = strconv.AppendInt(w.buf, n, 10)
}

// uuid is the uuid crate's: it reads the hyphenated, simple, braced and
// urn forms in either case and writes lower-case hyphenated.
func (w *serdeWriter) uuid(v any) {
	s, ok := v.(string)
	if !ok {
		w.fail("must be a UUID string")
		return
	}
	id, err := mzuuid.Canonical(s)
	if err != nil {
		w.fail("must be a UUID: %v", err)
		return
	}
	w.string(id)
}

func (w *serdeWriter) list(write func(any)) func(any) {
	return func(v any) {
		items, ok := v.([]any)
		if !ok {
			w.fail("must be a list")
			return
		}
		w.separate()
		w.buf = append(w.buf, '[')
		w.comma = append(w.comma, false)
		for i, item := range items {
			w.path = append(w.path, "["+strconv.Itoa(i)+"]")
			write(item)
			w.path = w.path[:len(w.path)-1]
		}
		w.comma = w.comma[:len(w.comma)-1]
		w.buf = append(w.buf, ']')
	}
}

func (w *serdeWriter) strings(v any) { w.list(w.string)(v) }

// stringMap is a BTreeMap<String, String>: keys in byte order, which is
// the order Go's sort gives strings.
func (w *serdeWriter) stringMap(v any) { w.sortedMap(v, w.string) }

func (w *serdeWriter) sortedMap(v any, write func(any)) {
	m, ok := v.(map[string]any)
	if !ok {
		w.fail("must be an object")
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.object(func() {
		for _, k := range keys {
			w.field(k)
			if m[k] == nil {
				w.fail("null is not a value")
			} else {
				write(m[k])
			}
			w.endField()
		}
	})
}

// The k8s-openapi (feature v1_34) types the spec holds.

func (w *serdeWriter) envVar(v any) {
	w.omitting(v,
		structField{"name", true, w.string},
		structField{"value", false, w.string},
		structField{"valueFrom", false, w.envVarSource})
}

func (w *serdeWriter) envVarSource(v any) {
	w.omitting(v,
		structField{"configMapKeyRef", false, w.keySelector},
		structField{"fieldRef", false, w.objectFieldSelector},
		structField{"fileKeyRef", false, w.fileKeySelector},
		structField{"resourceFieldRef", false, w.resourceFieldSelector},
		structField{"secretKeyRef", false, w.keySelector})
}

// keySelector is ConfigMapKeySelector and SecretKeySelector.
func (w *serdeWriter) keySelector(v any) {
	w.omitting(v,
		structField{"key", true, w.string},
		structField{"name", true, w.string},
		structField{"optional", false, w.bool})
}

func (w *serdeWriter) objectFieldSelector(v any) {
	w.omitting(v,
		structField{"apiVersion", false, w.string},
		structField{"fieldPath", true, w.string})
}

func (w *serdeWriter) fileKeySelector(v any) {
	w.omitting(v,
		structField{"key", true, w.string},
		structField{"optional", false, w.bool},
		structField{"path", true, w.string},
		structField{"volumeName", true, w.string})
}

func (w *serdeWriter) resourceFieldSelector(v any) {
	w.omitting(v,
		structField{"containerName", false, w.string},
		structField{"divisor", false, w.quantity},
		structField{"resource", true, w.string})
}

func (w *serdeWriter) resourceRequirements(v any) {
	w.omitting(v,
		structField{"claims", false, w.list(w.resourceClaim)},
		structField{"limits", false, func(v any) { w.sortedMap(v, w.quantity) }},
		structField{"requests", false, func(v any) { w.sortedMap(v, w.quantity) }})
}

func (w *serdeWriter) resourceClaim(v any) {
	w.omitting(v,
		structField{"name", true, w.string},
		structField{"request", false, w.string})
}

// certSpec is upstream's MaterializeCertSpec (serde-derived: absent Options
// are null, except the two key fields, which it skips when absent).
func (w *serdeWriter) certSpec(v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		w.fail("must be an object")
		return
	}
	w.object(func() {
		w.option(obj, "dnsNames", w.strings)
		w.option(obj, "duration", w.string)
		w.option(obj, "renewBefore", w.string)
		w.option(obj, "issuerRef", w.issuerRef)
		w.option(obj, "secretTemplate", w.secretTemplate)
		for _, f := range []structField{{"privateKeyAlgorithm", false, w.enum(privateKeyAlgorithms...)}, {"privateKeySize", false, w.int64}} {
			if obj[f.key] != nil {
				w.field(f.key)
				f.write(obj[f.key])
				w.endField()
			}
		}
	})
}

// issuerRef is kopium's CertificateIssuerRef: name is required (serde
// refuses a missing one), group and kind are skipped when absent.
func (w *serdeWriter) issuerRef(v any) {
	obj, ok := v.(map[string]any)
	if !ok {
		w.fail("must be an object")
		return
	}
	w.object(func() {
		for _, k := range []string{"group", "kind"} {
			if obj[k] != nil {
				w.field(k)
				w.string(obj[k])
				w.endField()
			}
		}
		w.requiredString(obj, "name")
	})
}

func (w *serdeWriter) secretTemplate(v any) {
	w.omitting(v,
		structField{"annotations", false, w.stringMap},
		structField{"labels", false, w.stringMap})
}

// appendSerdeString quotes s as serde_json does: only '"', '\\' and control
// characters are escaped (\b \t \n \f \r short, the rest as \u00xx in
// lower-case hex); everything else, '<', '&', U+2028 included, is written
// as is. Go's encoding/json escapes more, so it cannot be used here.
func appendSerdeString(buf []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		start = i + 1
		switch c {
		case '"':
			buf = append(buf, '\\', '"')
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\r':
			buf = append(buf, '\\', 'r')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// RolloutRequest is the v1alpha1 requestRollout that stands for a v1 rollout
// hash: a name-based UUID, so re-applying an unchanged v1 spec maps to the
// same request and never triggers a rollout.
func RolloutRequest(rolloutHash string) string {
	// uuid.NewSHA1, with the hash input on the stack: every conversion to
	// v1alpha1 and every check of the way back computes one or two.
	var input [16 + 2*sha256.Size]byte
	sum := sha1.Sum(append(append(input[:0], uuid.NameSpaceOID[:]...), rolloutHash...))
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}
