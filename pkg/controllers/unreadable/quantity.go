package unreadable

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/materializeinc/orchestratord/pkg/boundedtext"
)

// A quantity is read by resource.ParseQuantity, and written back (every
// time the object is encoded) by Quantity.String, whose time and memory
// grow with the digits written and with the exponent: a million digits
// take seconds, an exponent of -100000000 more time than anyone waits, one
// of 9999 after 19 digits 30 ms per encoding, and the API server stores
// them all under upstream's CRD (its quantities have no pattern).
// No quantity a person writes has more than maxQuantityDigits digits in a
// row or an exponent beyond maxQuantityExponent, so an object with one is
// not read at all: it is unreadable, its owner's alone to fix.
const (
	maxQuantityDigits   = 64
	maxQuantityExponent = 99
)

// quantitySpec is every quantity the three kinds' specs hold, at either
// version: the resource requirements of environmentd, balancerd and the
// console (a Balancer's or Console's own), the scratch volume's size, and
// an environment variable's resourceFieldRef.divisor.
type quantitySpec struct {
	EnvironmentdResourceRequirements *resourceQuantities `json:"environmentdResourceRequirements"`
	BalancerdResourceRequirements    *resourceQuantities `json:"balancerdResourceRequirements"`
	ConsoleResourceRequirements      *resourceQuantities `json:"consoleResourceRequirements"`
	ResourceRequirements             *resourceQuantities `json:"resourceRequirements"`
	ScratchVolume                    json.RawMessage     `json:"environmentdScratchVolumeStorageRequirement"`
	ExtraEnv                         []struct {
		ValueFrom *struct {
			ResourceFieldRef *struct {
				Divisor json.RawMessage `json:"divisor"`
			} `json:"resourceFieldRef"`
		} `json:"valueFrom"`
	} `json:"environmentdExtraEnv"`
}

type resourceQuantities struct {
	Limits   map[string]json.RawMessage `json:"limits"`
	Requests map[string]json.RawMessage `json:"requests"`
}

// checkQuantities returns an error naming the first quantity of raw, one
// object, that is too costly to read, in a fixed order (the reason an
// Event quotes does not change from one read to the next). Only an object
// costlyDigits flags has its quantities decoded.
func checkQuantities(raw []byte) error {
	if !costlyDigits(raw) {
		return nil
	}
	var obj struct {
		Spec quantitySpec `json:"spec"`
	}
	// A type error elsewhere leaves the rest decoded, and the Go types
	// would read that rest too: what was decoded is checked.
	_ = json.Unmarshal(raw, &obj)
	s := obj.Spec
	for _, r := range []struct {
		path string
		q    *resourceQuantities
	}{
		{"spec.environmentdResourceRequirements", s.EnvironmentdResourceRequirements},
		{"spec.balancerdResourceRequirements", s.BalancerdResourceRequirements},
		{"spec.consoleResourceRequirements", s.ConsoleResourceRequirements},
		{"spec.resourceRequirements", s.ResourceRequirements},
	} {
		if r.q == nil {
			continue
		}
		for _, m := range []struct {
			kind   string
			values map[string]json.RawMessage
		}{{"limits", r.q.Limits}, {"requests", r.q.Requests}} {
			for _, name := range slices.Sorted(maps.Keys(m.values)) {
				if err := checkQuantity(m.values[name]); err != nil {
					return fmt.Errorf("%s.%s[%s]: %w", r.path, m.kind, name, err)
				}
			}
		}
	}
	if err := checkQuantity(s.ScratchVolume); err != nil {
		return fmt.Errorf("spec.environmentdScratchVolumeStorageRequirement: %w", err)
	}
	for i, env := range s.ExtraEnv {
		if env.ValueFrom != nil && env.ValueFrom.ResourceFieldRef != nil {
			if err := checkQuantity(env.ValueFrom.ResourceFieldRef.Divisor); err != nil {
				return fmt.Errorf("spec.environmentdExtraEnv[%d].valueFrom.resourceFieldRef.divisor: %w", i, err)
			}
		}
	}
	return nil
}

// costlyDigits tells whether raw holds a run of more than
// maxQuantityDigits digits, or a word made only of a number's characters
// (digits, '.', signs, e and E: a quantity whose exponent resource.
// ParseQuantity reads has no other, the spaces around aside) whose
// exponent has more digits than maxQuantityExponent: only then can one of
// its quantities be too costly to read. A word ends at anything but a
// letter or digit, so a UUID's hex, in which an e is followed by three
// digits one time in three, is not one: an everyday object costs two
// scans of its bytes, not a decode.
func costlyDigits(raw []byte) bool {
	run := 0
	for _, c := range raw {
		if isDigit(c) {
			if run++; run > maxQuantityDigits {
				return true
			}
			continue
		}
		run = 0
	}
	for i := 0; i < len(raw); {
		if !isNumberByte(raw[i]) {
			i++
			continue
		}
		j := i
		for j < len(raw) && isNumberByte(raw[j]) {
			j++
		}
		word := (i == 0 || !isAlphanumeric(raw[i-1])) && (j == len(raw) || !isAlphanumeric(raw[j]))
		if word && longExponent(raw[i:j]) {
			return true
		}
		i = j
	}
	return false
}

// longExponent tells whether w holds an e or E, then an optional sign, then
// more digits than maxQuantityExponent has.
func longExponent(w []byte) bool {
	maxExponentDigits := len(strconv.Itoa(maxQuantityExponent))
	for i, c := range w {
		if c != 'e' && c != 'E' {
			continue
		}
		j := i + 1
		if j < len(w) && (w[j] == '+' || w[j] == '-') {
			j++
		}
		k := j
		for k < len(w) && isDigit(w[k]) {
			k++
		}
		if k-j > maxExponentDigits {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isNumberByte(c byte) bool {
	return isDigit(c) || c == '.' || c == '+' || c == '-' || c == 'e' || c == 'E'
}
func isAlphanumeric(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// checkQuantity refuses a quantity (a JSON string or number) too costly to
// read, as Quantity.UnmarshalJSON would read it: one pair of quotes off,
// then the spaces around. Whether it reads at all is the Go types' to say.
func checkQuantity(v json.RawMessage) error {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	s := strings.TrimSpace(string(v))
	run, longest := 0, 0
	for i := range len(s) {
		if isDigit(s[i]) {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	if longest > maxQuantityDigits {
		return fmt.Errorf("a quantity with %d digits in a row is not read (at most %d)", longest, maxQuantityDigits)
	}
	i := strings.LastIndexAny(s, "eE")
	if i < 0 {
		return nil
	}
	exponent := s[i+1:]
	if strings.TrimLeft(exponent, "+-") == "" || strings.Trim(exponent, "+-0123456789") != "" {
		return nil // an SI suffix (E, Ei), or not an exponent
	}
	e, err := strconv.ParseInt(exponent, 10, 64)
	if err != nil || e > maxQuantityExponent || e < -maxQuantityExponent {
		return fmt.Errorf("a quantity with the exponent %s is not read (at most %d either way)", boundedtext.Cut(exponent, 32), maxQuantityExponent)
	}
	return nil
}

// ErrCostlyQuantity refuses a response (GuardTransport). A write the API
// server answered so has taken effect: the caller that needs nothing of
// the object it returns may count it done.
var ErrCostlyQuantity = errors.New("the operator does not read an object with this quantity")

// GuardTransport wraps the transport of a client that reads Materializes,
// Balancers or Consoles outside the informers (a reconciler's GET, the
// object a write returns): a response carrying one whose quantity is too
// costly to read is refused before any Go type reads it. A tenant who
// changes its object between the informers' read and such a call would
// otherwise hold the worker for as long as it likes. Watches are left to
// the informers' readers, which check each object (Clientset). The guard
// reads JSON only: it asks for JSON whatever the client prefers (CBOR,
// when client-go's ClientsPreferCBOR gate is on), and refuses any other
// answer rather than pass on what it did not check.
func GuardTransport(rt http.RoundTripper) http.RoundTripper {
	return guard{rt}
}

type guard struct{ next http.RoundTripper }

func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" || !strings.Contains(req.URL.Path, "/materialize.cloud/") {
		return g.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Accept", "application/json")
	resp, err := g.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	if mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mediaType != "application/json" {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s %s: the answer's Content-Type is %q, not JSON, whose quantities are checked", req.Method, req.URL.Path, resp.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if !costlyDigits(body) {
		return resp, nil
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	objects := []json.RawMessage{body}
	if json.Unmarshal(body, &list) == nil && list.Items != nil {
		objects = list.Items
	}
	for _, obj := range objects {
		if err := checkQuantities(obj); err != nil {
			return nil, fmt.Errorf("%s %s: %w: %w", req.Method, req.URL.Path, ErrCostlyQuantity, err)
		}
	}
	return resp, nil
}
