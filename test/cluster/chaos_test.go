package cluster

import (
	"testing"
	"time"
)

// A pod that led two Leases, lost both (the window opens at the expiry of
// the last one lost), rejoined and acquired one again (the window closes).
// A loss that leaves a Lease held opens no window.
func TestFencedWindowsFollowTheControllersLog(t *testing.T) {
	log := []byte(`not json: klog before the logger
{"level":"info","ts":"2026-12-01T10:00:00.000Z","msg":"acquired lease","lease":"ns/m","identity":"p"}
{"level":"info","ts":"2026-12-01T10:00:00.500Z","msg":"acquired lease","lease":"ns/b","identity":"p"}
{"level":"warn","ts":"2026-12-01T10:01:10.000Z","msg":"lost lease","lease":"ns/m","identity":"p","renewedAt":"2026-12-01T10:01:00.123456789Z"}
{"level":"warn","ts":"2026-12-01T10:01:10.100Z","msg":"lost lease","lease":"ns/b","identity":"p","renewedAt":"2026-12-01T10:01:00.200000000Z"}
{"level":"warn","ts":"2026-12-01T10:01:10.200Z","msg":"lease lost; rejoining the election","lease":"m"}
{"level":"info","ts":"2026-12-01T10:02:00.250Z","msg":"acquired lease","lease":"ns/c","identity":"p"}
{"level":"info","ts":"2026-12-01T10:03:00.000Z","msg":"released lease","lease":"ns/c","identity":"p"}
{"level":"info","ts":"2026-12-01T10:03:01.000Z","msg":"acquired lease","lease":"ns/m","identity":"p"}
{"level":"warn","ts":"2026-12-01T10:04:00.000Z","msg":"lost lease","lease":"ns/m","identity":"p","renewedAt":"2026-12-01T10:03:50Z"}
`)
	windows, err := fencedWindows(log, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if len(windows) != 2 {
		t.Fatalf("windows = %v, want 2", windows)
	}
	if want := at("2026-12-01T10:01:15.2Z"); !windows[0].From.Equal(want) || !windows[0].To.Equal(at("2026-12-01T10:02:00.25Z")) {
		t.Errorf("first window %v, want from %v (the last lost Lease's expiry) to the next acquisition", windows[0], want)
	}
	if want := at("2026-12-01T10:04:05Z"); !windows[1].From.Equal(want) || windows[1].To.Before(time.Now()) {
		t.Errorf("second window %v, want from %v, still open", windows[1], want)
	}
	if _, err := fencedWindows([]byte(`{"msg":"lost lease","lease":"ns/m","renewedAt":"yesterday"}`), time.Second); err == nil {
		t.Error("an unreadable renewedAt must be an error, not a window silently skipped")
	}
}
