package outbuf

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestOutBuf appends and writes at random sizes, with a socket that takes
// a random part of each write, and checks that every byte comes out once,
// in order, and that Len counts what waits.
func TestOutBuf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var o Buf
	var in, out []byte
	full := errors.New("socket failed")
	for round := range 2000 {
		p := make([]byte, rng.IntN(3*blockMax))
		for i := range p {
			p[i] = byte(len(in) + i)
		}
		in = append(in, p...)
		o.Append(p)
		if o.Len() != len(in)-len(out) {
			t.Fatalf("round %d: Len %d after append, want %d", round, o.Len(), len(in)-len(out))
		}
		fail := rng.IntN(50) == 0
		err := o.WriteTo(func(b []byte) (int, error) {
			n := rng.IntN(len(b) + 1)
			out = append(out, b[:n]...)
			if fail {
				return n, full
			}
			return n, nil
		})
		if fail != (err != nil) {
			t.Fatalf("round %d: WriteTo = %v, want the socket's error: %v", round, err, fail)
		}
		if o.Len() != len(in)-len(out) {
			t.Fatalf("round %d: Len %d after write, want %d", round, o.Len(), len(in)-len(out))
		}
	}
	o.WriteTo(func(b []byte) (int, error) { out = append(out, b...); return len(b), nil })
	if o.Len() != 0 || o.blocks != nil || !bytes.Equal(in, out) {
		t.Fatalf("after the last write: Len %d, %d blocks, %d bytes out of %d in, equal %v", o.Len(), len(o.blocks), len(out), len(in), bytes.Equal(in, out))
	}
}
