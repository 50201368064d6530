// Package pgwire is the part of PostgreSQL's wire protocol (v3) the
// stand-ins speak: the startup phase, framed messages and error responses,
// and a client's handshake for probes. Every length a peer sends is bounded
// before anything is allocated for it.
package pgwire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// Startup-phase request codes (the protocol version takes the same place).
const (
	Version3          int32 = 196608
	SSLRequestCode    int32 = 80877103
	GSSENCRequestCode int32 = 80877104
	CancelRequestCode int32 = 80877102
)

// Bounds on what a peer may make us read: PostgreSQL's own limit for a
// startup packet, and a megabyte for a message.
const (
	MaxStartupLength = 10000
	MaxMessageLength = 1 << 20
)

// SQLSTATE codes the stand-ins answer with.
const (
	RejectedEstablishment = "08004"
	ProtocolViolation     = "08P01"
	InvalidPassword       = "28P01"
	InvalidAuthorization  = "28000"
	FeatureNotSupported   = "0A000"
)

// Startup is one startup-phase packet: a version (or request code) and, for
// a protocol version, the parameters.
type Startup struct {
	Code   int32
	Params map[string]string
}

// ReadStartup reads one startup-phase packet.
func ReadStartup(r io.Reader) (Startup, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Startup{}, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:4]))
	if n < 8 || n > MaxStartupLength {
		return Startup{}, fmt.Errorf("invalid startup packet length %d", n)
	}
	s := Startup{Code: int32(binary.BigEndian.Uint32(hdr[4:]))}
	body := make([]byte, n-8)
	if _, err := io.ReadFull(r, body); err != nil {
		return Startup{}, err
	}
	if s.Code != Version3 {
		return s, nil
	}
	s.Params = map[string]string{}
	fields := bytes.Split(body, []byte{0})
	// name\0value\0 ... \0: an even number of fields before the last two
	// empty ones.
	if len(fields) < 2 || len(fields[len(fields)-1]) != 0 || len(fields[len(fields)-2]) != 0 || len(fields)%2 != 0 {
		return Startup{}, errors.New("invalid startup packet layout")
	}
	for i := 0; i+1 < len(fields)-2; i += 2 {
		s.Params[string(fields[i])] = string(fields[i+1])
	}
	return s, nil
}

// WriteStartup writes a protocol-version-3 startup packet with params.
func WriteStartup(w io.Writer, params map[string]string) error {
	var body bytes.Buffer
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		body.WriteString(k)
		body.WriteByte(0)
		body.WriteString(params[k])
		body.WriteByte(0)
	}
	body.WriteByte(0)
	return writeStartupPacket(w, Version3, body.Bytes())
}

// WriteSSLRequest asks the server for TLS; it answers one byte, 'S' or 'N'.
func WriteSSLRequest(w io.Writer) error { return writeStartupPacket(w, SSLRequestCode, nil) }

func writeStartupPacket(w io.Writer, code int32, body []byte) error {
	buf := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(buf[:4], uint32(8+len(body)))
	binary.BigEndian.PutUint32(buf[4:], uint32(code))
	_, err := w.Write(append(buf, body...))
	return err
}

// ReadMessage reads one typed message.
func ReadMessage(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 || n > MaxMessageLength {
		return 0, nil, fmt.Errorf("invalid length %d for message %q", n, hdr[0])
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return hdr[0], body, nil
}

// WriteMessage writes one typed message.
func WriteMessage(w io.Writer, typ byte, body []byte) error {
	buf := make([]byte, 5, 5+len(body))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:], uint32(4+len(body)))
	_, err := w.Write(append(buf, body...))
	return err
}

// Error is an ErrorResponse's fields.
type Error struct {
	Severity, Code, Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (SQLSTATE %s)", e.Severity, e.Message, e.Code)
}

// WriteError writes an ErrorResponse.
func WriteError(w io.Writer, severity, code, message string) error {
	var b bytes.Buffer
	for _, f := range []struct {
		t byte
		v string
	}{{'S', severity}, {'V', severity}, {'C', code}, {'M', message}} {
		b.WriteByte(f.t)
		b.WriteString(f.v)
		b.WriteByte(0)
	}
	b.WriteByte(0)
	return WriteMessage(w, 'E', b.Bytes())
}

// ParseError reads an ErrorResponse's body.
func ParseError(body []byte) *Error {
	e := &Error{}
	for _, f := range bytes.Split(body, []byte{0}) {
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case 'S':
			e.Severity = string(f[1:])
		case 'C':
			e.Code = string(f[1:])
		case 'M':
			e.Message = string(f[1:])
		}
	}
	return e
}

// Authentication request codes ('R' messages).
const (
	AuthOK                = 0
	AuthCleartextPassword = 3
)

// WriteAuth writes an authentication request of code.
func WriteAuth(w io.Writer, code uint32) error {
	return WriteMessage(w, 'R', binary.BigEndian.AppendUint32(nil, code))
}

// WriteReadyForQuery tells the client the server waits for a query, idle.
func WriteReadyForQuery(w io.Writer) error { return WriteMessage(w, 'Z', []byte{'I'}) }

// WriteParameterStatus reports one run-time parameter.
func WriteParameterStatus(w io.Writer, name, value string) error {
	return WriteMessage(w, 'S', []byte(name+"\x00"+value+"\x00"))
}

// Handshake is a client's startup on conn, as psql's without TLS: it logs
// in as user (with password when the server asks for one) and returns once
// the server is ready for a query, or with the server's error.
func Handshake(conn io.ReadWriter, user, password string) error {
	if err := WriteStartup(conn, map[string]string{"user": user}); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	for {
		typ, body, err := ReadMessage(r)
		if err != nil {
			return err
		}
		switch typ {
		case 'E':
			return ParseError(body)
		case 'R':
			if len(body) < 4 {
				return errors.New("short authentication request")
			}
			switch code := binary.BigEndian.Uint32(body); code {
			case AuthOK:
			case AuthCleartextPassword:
				if err := WriteMessage(conn, 'p', append([]byte(password), 0)); err != nil {
					return err
				}
			default:
				return fmt.Errorf("unsupported authentication request %d", code)
			}
		case 'Z':
			return WriteMessage(conn, 'X', nil)
		}
	}
}
