package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
)

// readerFuzzLimits are small so that fuzzing stays cheap and reaches every limit:
// the tiny set makes the query buffer limit race the other errors, which is
// where the outcome could start to depend on how the input was split.
var readerFuzzLimits = []ReaderLimits{
	{MaxInlineLen: 16, MaxMultibulk: 8, MaxBulkLen: 32, MaxQueryBuffer: 48},
	{MaxInlineLen: 1 << 10, MaxMultibulk: 1 << 10, MaxBulkLen: 1 << 16, MaxQueryBuffer: 1 << 20},
	{MaxInlineLen: 1 << 10, MaxMultibulk: 1 << 10, MaxBulkLen: 1 << 16, MaxQueryBuffer: 1 << 20, PreAuth: true},
}

// FuzzReader checks that no input panics the reader and that reading an input
// whole or one byte per Read gives the same commands and the same final error.
func FuzzReader(f *testing.F) {
	seeds := []string{
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$7\r\nACQUIRE\r\n$10\r\nlock:12345\r\n$5\r\n30000\r\n",
		"*2\r\n$4\r\nECHO\r\n$8\r\na\r\nb\x00c\r\n\r\n*0\r\n*-1\r\n",
		"PING\r\nSET k \"a\\x41\\n\\\"\" 'b\\'c'\n\r\n  \n",
		"*1\r\n$4\r\nPING\r\nPING\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
		"*1\r\n$9223372036854775807\r\nxx\r\n",
		"*10000000000\r\n",
		"*1\r\n$16\r\n0123456789abcdef\r\n",
		"*1\r\nGET\r\n",
		"\"unbalanced\n",
		"*1\r\n$4\r\nPINGxx",
		"*11\r\n",
		"*1\r\n$16385\r\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, limits := range readerFuzzLimits {
			whole, wholeErr := readAllCommands(bytes.NewReader(in), limits)
			split, splitErr := readAllCommands(&trickleReader{data: in}, limits)
			if fmt.Sprint(wholeErr) != fmt.Sprint(splitErr) {
				t.Fatalf("limits %+v: whole err %v, split err %v", limits, wholeErr, splitErr)
			}
			if !reflect.DeepEqual(whole, split) {
				t.Fatalf("limits %+v: whole %q, split %q", limits, whole, split)
			}
			checkReaderFuzzResult(t, limits, whole, wholeErr)
		}
	})
}

// checkReaderFuzzResult checks what must hold for any input: only the documented
// errors, and no command beyond the limits.
func checkReaderFuzzResult(t *testing.T, limits ReaderLimits, cmds [][]string, err error) {
	var perr *ProtocolError
	if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &perr) {
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
	if limits.PreAuth {
		limits.MaxBulkLen = min(limits.MaxBulkLen, PreAuthMaxBulkLen)
	}
	for _, cmd := range cmds {
		if len(cmd) == 0 || len(cmd) > max(limits.MaxMultibulk, limits.MaxInlineLen) {
			t.Fatalf("command with %d args", len(cmd))
		}
		for _, a := range cmd {
			if int64(len(a)) > max(limits.MaxBulkLen, int64(limits.MaxInlineLen)) {
				t.Fatalf("argument of %d bytes", len(a))
			}
		}
	}
}

// FuzzReaderRoundTrip checks that arbitrary arguments come back unchanged
// when framed as a RESP array and as an inline line with every byte escaped
// in double quotes, the two ways a client can frame binary data.
func FuzzReaderRoundTrip(f *testing.F) {
	f.Add([]byte("ACQUIRE"), []byte("lock:1"), []byte("30000"))
	f.Add([]byte("SET"), []byte("a\r\nb"), []byte("\"' \\x00"))
	f.Add([]byte(""), []byte("*1\r\n$4\r\n"), []byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		want := []string{string(a), string(b), string(c)}
		var resp, inline bytes.Buffer
		fmt.Fprintf(&resp, "*%d\r\n", len(want))
		for _, arg := range want {
			fmt.Fprintf(&resp, "$%d\r\n%s\r\n", len(arg), arg)
			inline.WriteString(` "`)
			for i := range len(arg) {
				fmt.Fprintf(&inline, `\x%02x`, arg[i])
			}
			inline.WriteByte('"')
		}
		inline.WriteString("\r\n")
		limits := DefaultReaderLimits()
		for _, in := range [][]byte{resp.Bytes(), inline.Bytes()} {
			if len(in) > limits.MaxInlineLen && in[0] != '*' {
				continue // too long for an inline line; covered by TestReaderErrors
			}
			got, err := readAllCommands(&trickleReader{data: in}, limits)
			if err != io.EOF {
				t.Fatalf("%q: err %v", in, err)
			}
			if !reflect.DeepEqual(got, [][]string{want}) {
				t.Fatalf("%q: got %q, want %q", in, got, want)
			}
		}
	})
}
