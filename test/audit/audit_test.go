package audit

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLateWritesAreSuccessfulNonLeaseWritesInAWindow(t *testing.T) {
	log := `{"verb":"patch","requestURI":"/a","userAgent":"op/p","objectRef":{"resource":"statefulsets"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:05.000000Z"}
{"verb":"patch","requestURI":"/before","userAgent":"op/p","objectRef":{"resource":"statefulsets"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:04.999999Z"}
{"verb":"get","requestURI":"/read","userAgent":"op/p","objectRef":{"resource":"statefulsets"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:06Z"}
{"verb":"update","requestURI":"/lease","userAgent":"op/p","objectRef":{"resource":"leases"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:06Z"}
{"verb":"create","requestURI":"/refused","userAgent":"op/p","objectRef":{"resource":"events"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-12-01T10:00:06Z"}
{"verb":"create","requestURI":"/other","userAgent":"op/p2","objectRef":{"resource":"events"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-12-01T10:00:06Z"}
{"verb":"delete","requestURI":"/end","userAgent":"op/p","objectRef":{"resource":"pods"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-12-01T10:00:10Z"}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	events, err := Read(path, "op/p")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	late := LateWrites(events, "op/p", []Window{{From: from, To: from.Add(5 * time.Second)}})
	if len(late) != 1 || late[0].RequestURI != "/a" {
		t.Errorf("late writes %v, want only /a (the window is [from, to); reads, Lease writes, refused writes and other agents do not count)", late)
	}
}
