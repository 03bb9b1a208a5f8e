package outbuf

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestOutBuf appends and writes at random sizes, with a socket that takes
// a random part of each write, and checks that every byte comes out once,
// in order, and that Len counts what waits. The k-th byte appended is
// byte(k), so what comes out is checked against that pattern as it comes,
// not kept.
func TestOutBuf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pattern := make([]byte, 256+3*blockMax) // pattern[i] == byte(i)
	for i := range pattern {
		pattern[i] = byte(i)
	}
	// bytesAt is the pattern's n bytes from the k-th on.
	bytesAt := func(k, n int) []byte { return pattern[k%256 : k%256+n] }
	var o Buf
	var in, out int // bytes appended, bytes written
	take := func(b []byte) {
		t.Helper()
		if !bytes.Equal(b, bytesAt(out, len(b))) {
			t.Fatalf("bytes %d to %d written are not the ones appended there", out, out+len(b))
		}
		out += len(b)
	}
	full := errors.New("socket failed")
	for round := range 2000 {
		p := bytesAt(in, rng.IntN(3*blockMax))
		in += len(p)
		o.Append(p)
		if o.Len() != in-out {
			t.Fatalf("round %d: Len %d after append, want %d", round, o.Len(), in-out)
		}
		fail := rng.IntN(50) == 0
		err := o.WriteTo(func(b []byte) (int, error) {
			n := rng.IntN(len(b) + 1)
			take(b[:n])
			if fail {
				return n, full
			}
			return n, nil
		})
		if fail != (err != nil) {
			t.Fatalf("round %d: WriteTo = %v, want the socket's error: %v", round, err, fail)
		}
		if o.Len() != in-out {
			t.Fatalf("round %d: Len %d after write, want %d", round, o.Len(), in-out)
		}
	}
	o.WriteTo(func(b []byte) (int, error) { take(b); return len(b), nil })
	if o.Len() != 0 || o.blocks != nil || out != in {
		t.Fatalf("after the last write: Len %d, %d blocks, %d bytes out of %d in", o.Len(), len(o.blocks), out, in)
	}
}
