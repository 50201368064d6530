package app_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/materializeinc/orchestratord/test/fixture"
	"github.com/materializeinc/orchestratord/test/hostile"
)

// chartMemoryLimit is the chart's webhook limits.memory, which it passes
// as --memory-limit.
const chartMemoryLimit = 256 << 20

// hostileLoad is what the webhook process at the chart's memory limit is
// sent at once: concurrent large reviews (the 11.8 MiB of 34 000 small
// objects that once took it past its limit, realistic objects, the
// costliest shape per byte), clients that send only headers declaring
// 12 MiB, and many idle connections.
type hostileLoad struct {
	answered map[string]map[int]int // shape -> status -> count
	peakRSS  int64
}

func runHostileLoad(t testing.TB, rounds int) hostileLoad {
	ns := newNamespace(t)
	hook := startWebhook(t, ns, "--memory-limit="+strconv.Itoa(chartMemoryLimit), "--max-connections=64")
	shapes := hostile.Reviews(12 << 20)
	load := map[string]string{
		"small-objects 12 MiB":     shapes["small-objects"],
		"realistic 12 MiB":         shapes["realistic"],
		"one-member-maps 12 MiB":   shapes["one-member-maps"],
		"one-member-maps 3 MiB":    hostile.Reviews(3 << 20)["one-member-maps"],
		"realistic page of 500":    string(fixture.ConversionReview("materialize.cloud/v1", 500)),
		"small-objects 12 MiB (2)": shapes["small-objects"],
		"html-escaped 12 MiB":      shapes["html-escaped"],
		"carried-role 12 MiB":      shapes["carried-role"],
		"carried-role 4 MiB":       hostile.Reviews(4 << 20)["carried-role"],
	}
	stop := make(chan struct{})
	var squatters sync.WaitGroup
	// Headers only, declaring 12 MiB, on fresh connections while the load
	// runs, and idle TLS connections beyond the connection cap.
	for range 4 {
		squatters.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := tls.Dial("tcp", hook.https, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // an attacker
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				fmt.Fprintf(c, "POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 12<<20)
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, _ = c.Read(make([]byte, 1))
				c.Close()
			}
		})
	}
	var idle []net.Conn
	for range 100 {
		if c, err := net.Dial("tcp", hook.https); err == nil {
			idle = append(idle, c)
		}
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()

	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // measuring, not trusting
		ForceAttemptHTTP2: true,
	}}
	result := hostileLoad{answered: map[string]map[int]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, body := range load {
		result.answered[name] = map[int]int{}
		wg.Go(func() {
			for done := 0; done < rounds; {
				code, err := post(client, hook.https, body)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				result.answered[name][code]++
				mu.Unlock()
				if code == http.StatusTooManyRequests {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				done++
			}
		})
	}
	wg.Wait()
	close(stop)
	squatters.Wait()
	result.peakRSS = peakRSS(t, hook.cmd.Process.Pid)
	return result
}

func post(client *http.Client, addr, body string) (int, error) {
	resp, err := client.Post("https://"+addr+"/convert", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode == http.StatusOK && !bytes.HasSuffix(out, []byte(`"status":"Success"}}}`)) {
		return 0, fmt.Errorf("200 without success: ...%s", out[max(0, len(out)-300):])
	}
	return resp.StatusCode, nil
}

// peakRSS is the process's high-water mark of resident memory; the file
// pages it holds now (its binary's text) are logged, as they count
// towards a container's limit and not towards the Go memory limit.
func peakRSS(t testing.TB, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]int64{}
	for line := range strings.Lines(string(raw)) {
		name, rest, ok := strings.Cut(line, ":")
		if kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); ok && err == nil {
			fields[name] = kib << 10
		}
	}
	if fields["VmHWM"] == 0 {
		t.Fatal("no VmHWM in /proc status")
	}
	t.Logf("RSS now: %d MiB anonymous, %d MiB file", fields["RssAnon"]>>20, fields["RssFile"]>>20)
	return fields["VmHWM"]
}

// Under the hostile load the process stays under the chart's memory limit,
// answers every admissible review (after 429s), and refuses with 413 only
// the review that would cost more than its whole budget.
func TestHostileLoadStaysUnderTheChartsMemoryLimit(t *testing.T) {
	got := runHostileLoad(t, 1)
	t.Logf("peak RSS %d MiB; answers %v", got.peakRSS>>20, got.answered)
	if got.peakRSS >= chartMemoryLimit {
		t.Errorf("peak RSS %d MiB, at or over the chart's limit of %d MiB", got.peakRSS>>20, chartMemoryLimit>>20)
	}
	for name, codes := range got.answered {
		want := http.StatusOK
		switch name {
		case "one-member-maps 12 MiB", "html-escaped 12 MiB", "carried-role 12 MiB":
			want = http.StatusRequestEntityTooLarge
		}
		if codes[want] != 1 {
			t.Errorf("%s: answered %v, want one %d", name, codes, want)
		}
	}
}

// go test -run '^$' -bench HostileLoad -benchtime 3x ./pkg/webhook/app
func BenchmarkHostileLoad(b *testing.B) {
	var peak int64
	for b.Loop() {
		peak = max(peak, runHostileLoad(b, 2).peakRSS)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(chartMemoryLimit)/(1<<20), "limit-MiB")
}

// Three reviews at once whose kind is 4 MiB of invalid UTF-8 (once: a
// 13 MiB answer each, a 13 MiB log line, 284 MiB of RSS against a 256 MiB
// limit) are answered in a few hundred bytes, no log line is over 16 KiB,
// and the process stays under half the chart's limit.
func TestHugeInvalidKindsGetSmallAnswers(t *testing.T) {
	ns := newNamespace(t)
	hook := startWebhook(t, ns, "--memory-limit="+strconv.Itoa(chartMemoryLimit))
	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"` + strings.Repeat("\xff", 4<<20) +
		`","request":{"uid":"u","desiredAPIVersion":"materialize.cloud/v1","objects":[]}}`
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // an attacker
		ForceAttemptHTTP2: true,
	}}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			resp, err := client.Post("https://"+hook.https+"/convert", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			answer, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
				return
			}
			if resp.StatusCode != http.StatusBadRequest || len(answer) > 64<<10 {
				t.Errorf("answered %d with %d bytes, want 400 in at most 64 KiB: %.200q", resp.StatusCode, len(answer), answer)
			}
		})
	}
	wg.Wait()
	rss := peakRSS(t, hook.cmd.Process.Pid)
	t.Logf("peak RSS %d MiB", rss>>20)
	if rss > chartMemoryLimit/2 {
		t.Errorf("peak RSS %d MiB, over half the chart's limit of %d MiB", rss>>20, chartMemoryLimit>>20)
	}
	raw, err := os.ReadFile(hook.log)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for line := range strings.Lines(string(raw)) {
		if len(line) > 16<<10 {
			t.Errorf("a log line of %d bytes: %.200q", len(line), line)
		}
		if strings.Contains(line, "rejected conversion request") {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("%d refusals logged, want 3", refused)
	}
}
