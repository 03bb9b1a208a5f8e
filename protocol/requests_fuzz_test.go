package protocol

import (
	"bytes"
	"errors"
	"testing"
)

// maxParseFuzzLen bounds the fuzzed command lines: long enough for numkeys
// past MaxMultiKeys with every key present, short enough to stay cheap.
const maxParseFuzzLen = 4 << 10

// FuzzParseMAcquire checks that no arguments panic ParseMAcquire, that it
// fails only with wire errors, and that on success it took exactly numkeys
// keys, aliasing the arguments, and parsed the rest as ACQUIRE's options.
func FuzzParseMAcquire(f *testing.F) {
	seeds := []string{
		"MACQUIRE 100 2 a b OWNER me WAIT 5 PRIORITY -3 SHARED EPHEMERAL",
		"MACQUIRE 1 1 a shared",
		"MACQUIRE 1 3 SHARED OWNER 5",
		"MACQUIRE 1 1  ",
		"MACQUIRE 0 1 a",
		"MACQUIRE 1 1001 a",
		"MACQUIRE 1 3 a b",
		"MACQUIRE 1 1 a b",
		"MACQUIRE 1 1 a OWNER",
		"MACQUIRE 1 1 a SHARED SHARED",
		"MACQUIRE 1 -9223372036854775808 a",
		"MACQUIRE 1 9223372036854775807 a",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if len(line) > maxParseFuzzLen {
			return
		}
		args := bytes.Split([]byte(line), []byte(" "))
		if len(args) < 4 {
			return // MACQUIRE's arity check rejects it before the parser
		}
		got, err := ParseMAcquire(args)
		if err != nil {
			var we *Error
			if !errors.As(err, &we) {
				t.Fatalf("%q: err %T %v, want a *protocol.Error", line, err, err)
			}
			return
		}
		n, ok := ParseInt(args[2])
		if !ok || n < 1 || n > MaxMultiKeys || int64(len(got.Keys)) != n {
			t.Fatalf("%q: %d keys for numkeys %q", line, len(got.Keys), args[2])
		}
		for i, k := range got.Keys {
			if len(k) != len(args[3+i]) || len(k) > 0 && &k[0] != &args[3+i][0] {
				t.Fatalf("%q: Keys[%d] = %q does not alias args[%d] = %q", line, i, k, 3+i, args[3+i])
			}
		}
		if got.TTL <= 0 {
			t.Fatalf("%q: TTL %v", line, got.TTL)
		}
		// What follows the keys starts with an option name, never a
		// number, so ACQUIRE k takes no ttl from it and must agree.
		acqArgs := append([][]byte{[]byte("ACQUIRE"), []byte("k")}, args[3+n:]...)
		acq, err := ParseAcquire(acqArgs)
		if err != nil {
			t.Fatalf("%q: MACQUIRE accepted options that ACQUIRE rejects: %v", line, err)
		}
		if acq.TTL != 0 || !bytes.Equal(acq.Owner, got.Owner) || (acq.Owner == nil) != (got.Owner == nil) ||
			acq.Wait != got.Wait || acq.Priority != got.Priority || acq.Shared != got.Shared || acq.Ephemeral != got.Ephemeral {
			t.Fatalf("%q: MACQUIRE options %+v, ACQUIRE's %+v", line, got, acq)
		}
	})
}
