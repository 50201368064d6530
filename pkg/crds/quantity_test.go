package crds_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/materializeinc/orchestratord/pkg/crds"
)

// Every string the tightened quantity pattern admits (at most
// crds.QuantityMaxLength long) parses, and every one controller-gen's
// pattern admits that parses is admitted, unless its exponent has more
// than two digits: strings drawn from the generated pattern's grammar,
// decimal and long exponents included. (An exponent of more digits is not
// parsed here: resource.ParseQuantity may take for ever on it.)
func TestQuantityPatternAdmitsWhatParses(t *testing.T) {
	tight := regexp.MustCompile(crds.QuantityPattern)
	generated := regexp.MustCompile(crds.GeneratedQuantityPattern)
	rng := rand.New(rand.NewPCG(1, 2))
	digits := func(max int) string {
		var b strings.Builder
		for range rng.IntN(max + 1) {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		return b.String()
	}
	pick := func(options ...string) string { return options[rng.IntN(len(options))] }
	number := func(maxDigits int) string {
		switch rng.IntN(3) {
		case 0:
			return "1" + digits(maxDigits)
		case 1:
			return digits(maxDigits) + "." + digits(maxDigits)
		default:
			return "." + digits(maxDigits)
		}
	}
	admitted, refused := 0, 0
	for range 20000 {
		q := pick("", "+", "-") + number(6)
		exponent := ""
		switch rng.IntN(4) {
		case 0:
			q += pick("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E")
		case 1:
			exponent = number(6)
		case 2:
			exponent = digits(6)
		}
		if exponent != "" {
			q += pick("e", "E") + pick("", "+", "-") + exponent
		}
		if !generated.MatchString(q) || len(q) > crds.QuantityMaxLength {
			continue
		}
		if tight.MatchString(q) {
			admitted++
			if _, err := resource.ParseQuantity(q); err != nil {
				t.Fatalf("%q is admitted, but does not parse: %v", q, err)
			}
			continue
		}
		refused++
		if short := len(exponent) <= 2 && !strings.Contains(exponent, "."); short {
			if _, err := resource.ParseQuantity(q); err == nil {
				t.Fatalf("%q parses, and its exponent is short, but the pattern refuses it", q)
			}
		}
	}
	if admitted < 1000 || refused < 1000 {
		t.Fatalf("%d admitted, %d refused: the draw does not exercise both sides", admitted, refused)
	}
	t.Logf("%d admitted, %d refused", admitted, refused)
}
