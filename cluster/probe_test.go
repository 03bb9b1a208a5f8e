package cluster

import (
	"bytes"
	"errors"
	"testing"
)

// TestReadFrameTellsRESP: a connection whose peer answers in RESP fails
// with ErrNotRaftPort, saying what it answered; any other answer that is
// no frame fails as a frame too large, with its first bytes.
func TestReadFrameTellsRESP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   string
		want     error
		mentions string
	}{
		{"RESP error", "-ERR unknown command 'N'\r\n", ErrNotRaftPort, `"-ERR"`},
		{"RESP NOAUTH", "-NOAUTH Authentication required.\r\n", ErrNotRaftPort, `"-NOA"`},
		{"RESP simple string", "+OK\r\n", ErrNotRaftPort, `"+OK\r"`},
		{"HTTP", "HTTP/1.1 400 Bad Request\r\n", ErrFrameTooLarge, `"HTTP"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readFrame(bytes.NewReader([]byte(tc.answer)))
			if !errors.Is(err, tc.want) || !bytes.Contains([]byte(err.Error()), []byte(tc.mentions)) {
				t.Fatalf("readFrame(%q) = %v, want %v mentioning %s", tc.answer, err, tc.want, tc.mentions)
			}
			if tc.want == ErrFrameTooLarge && errors.Is(err, ErrNotRaftPort) {
				t.Fatalf("readFrame(%q) = %v, not a RESP answer", tc.answer, err)
			}
		})
	}
	// A real frame is read as one.
	f, err := readFrame(bytes.NewReader(appendFrame(nil, statusErr, 7, []byte("x"))))
	if err != nil || f.kind != statusErr || f.id != 7 || string(f.body) != "x" {
		t.Fatalf("readFrame of a frame = %+v, %v", f, err)
	}
}
