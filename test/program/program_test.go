package program

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestMetric(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`# HELP x_total things
# TYPE x_total counter
x_total{controller="materialize",result="success"} 3
x_total{controller="materialize",result="error"} 1
x_total{controller="materialize-other",result="success"} 100
go_memstats_heap_inuse_bytes 4.2e+06
`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if v, err := Metric(addr, "x_total", `controller="materialize"`); err != nil || v != 4 {
		t.Errorf("x_total{controller=materialize} = %v, %v; want 4", v, err)
	}
	if v, err := Metric(addr, "go_memstats_heap_inuse_bytes"); err != nil || v != 4.2e6 {
		t.Errorf("heap = %v, %v", v, err)
	}
	if _, err := Metric(addr, "x_total", `controller="balancer"`); err == nil {
		t.Error("a series that is not exported must be an error")
	}
	if _, err := Metric(addr, "x"); err == nil {
		t.Error("a name that only prefixes another must not match")
	}
}

// Figures read from one Scrape come from the same exposition, whatever
// the endpoint serves afterwards.
func TestScrapeIsOneMoment(t *testing.T) {
	value := "1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("a " + value + "\nb " + value + "\n"))
	}))
	defer srv.Close()
	e, err := Scrape(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	value = "2"
	a, errA := e.Sum("a")
	b, errB := e.Sum("b")
	if errA != nil || errB != nil || a != 1 || b != 1 {
		t.Errorf("a = %v (%v), b = %v (%v); want both 1 from the one scrape", a, errA, b, errB)
	}
}

// Free ports come from below the ephemeral and NodePort ranges, distinct,
// and bindable.
func TestFreePortsAvoidTheEphemeralRange(t *testing.T) {
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lowestPort || p >= lowestNodePort || p >= highestPort() {
			t.Errorf("port %d outside [%d, %d) (NodePorts from %d, ephemeral ports from %d)", p, lowestPort, highestPort(), lowestNodePort, ephemeralLow())
		}
		if seen[p] {
			t.Errorf("port %d given twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d not bindable: %v", p, err)
			continue
		}
		l.Close()
	}
}
