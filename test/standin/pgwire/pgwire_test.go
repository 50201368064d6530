package pgwire

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestStartupRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := WriteStartup(&b, map[string]string{"user": "materialize", "database": "db"}); err != nil {
		t.Fatal(err)
	}
	s, err := ReadStartup(&b)
	if err != nil || s.Code != Version3 || s.Params["user"] != "materialize" || s.Params["database"] != "db" || len(s.Params) != 2 {
		t.Fatalf("ReadStartup = %+v, %v", s, err)
	}
}

// A peer's lengths are checked before anything is allocated for them.
func TestRefusesHostileLengths(t *testing.T) {
	for _, n := range []uint32{0, 7, MaxStartupLength + 1, 1 << 31} {
		hdr := binary.BigEndian.AppendUint32(nil, n)
		hdr = binary.BigEndian.AppendUint32(hdr, uint32(Version3))
		if _, err := ReadStartup(bytes.NewReader(hdr)); err == nil {
			t.Errorf("a startup packet of length %d was read", n)
		}
	}
	for _, n := range []uint32{3, MaxMessageLength + 1, 1 << 31} {
		msg := append([]byte{'Q'}, binary.BigEndian.AppendUint32(nil, n)...)
		if _, _, err := ReadMessage(bytes.NewReader(msg)); err == nil {
			t.Errorf("a message of length %d was read", n)
		}
	}
	// Parameters that are not name/value pairs ending in an empty name.
	body := []byte("user\x00materialize\x00database\x00\x00")
	hdr := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(Version3))
	if _, err := ReadStartup(bytes.NewReader(append(hdr, body...))); err == nil {
		t.Error("an odd parameter list was read")
	}
}
