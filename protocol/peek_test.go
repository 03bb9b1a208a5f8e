package protocol

import (
	"bytes"
	"io"
	"testing"
)

func TestPeekArgs(t *testing.T) {
	acquire := "*3\r\n$7\r\nACQUIRE\r\n$6\r\nlock:1\r\n$5\r\n30000\r\n"
	ping := "*1\r\n$4\r\nPING\r\n"
	cases := []struct {
		name string
		in   string
		max  int
		want []string // name "|" arg, "<nil>" for no arg
		span int
	}{
		{"empty", "", 16, nil, 0},
		{"one", acquire, 16, []string{"ACQUIRE|lock:1"}, len(acquire)},
		{"no argument", ping, 16, []string{"PING|<nil>"}, len(ping)},
		{"several", acquire + ping + acquire, 16, []string{"ACQUIRE|lock:1", "PING|<nil>", "ACQUIRE|lock:1"}, 2*len(acquire) + len(ping)},
		{"at most max", acquire + ping + acquire, 2, []string{"ACQUIRE|lock:1", "PING|<nil>"}, len(acquire) + len(ping)},
		{"stops at an incomplete array", acquire + acquire[:20], 16, []string{"ACQUIRE|lock:1"}, len(acquire)},
		{"stops at inline", acquire + "PING\r\n" + acquire, 16, []string{"ACQUIRE|lock:1"}, len(acquire)},
		{"stops at *0", "*0\r\n" + acquire, 16, nil, 0},
		{"stops at a negative count", "*-1\r\n" + acquire, 16, nil, 0},
		{"stops at a missing CRLF after data", "*1\r\n$4\r\nPINGxx" + acquire, 16, nil, 0},
		{"stops at ten digits", "*1\r\n$1000000004\r\nPING\r\n", 16, nil, 0},
		{"stops at leading zeros", "*1\r\n$04\r\nPING\r\n", 16, nil, 0},
		{"a zero length is fine", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", 16, []string{"ECHO|"}, 20},
		{"stops at a header without digits", "*\r\n", 16, nil, 0},
		{"stops at a huge bulk", "*1\r\n$999999999\r\nxx", 16, nil, 0},
		{"empty strings", "*2\r\n$0\r\n\r\n$0\r\n\r\n", 16, []string{"|"}, 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			span := PeekArgs([]byte(tc.in), tc.max, func(name, arg []byte) {
				a := string(arg)
				if arg == nil {
					a = "<nil>"
				}
				got = append(got, string(name)+"|"+a)
			})
			if span != tc.span || len(got) != len(tc.want) {
				t.Fatalf("PeekArgs = %q spanning %d; want %q spanning %d", got, span, tc.want, tc.span)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("PeekArgs = %q; want %q", got, tc.want)
				}
			}
		})
	}
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	data []byte
	n    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[k:]
	return k, nil
}

// TestReaderLookahead checks that Lookahead shows what follows the command
// just read, with its offset in the stream, across the buffer's compaction.
func TestReaderLookahead(t *testing.T) {
	one := "*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n" // 21 bytes
	r := NewReader(&chunkReader{data: []byte(one + one + one[:10]), n: 30}, DefaultReaderLimits())
	if ahead, _ := r.Lookahead(); len(ahead) != 0 {
		t.Fatalf("Lookahead before any read = %q", ahead)
	}
	if _, err := r.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	// The first Read took 30 bytes: the rest of the second command is not here yet.
	if ahead, at := r.Lookahead(); string(ahead) != one[:9] || at != 21 {
		t.Fatalf("Lookahead = %q at %d; want %q at 21", ahead, at, one[:9])
	}
	if _, err := r.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	if ahead, at := r.Lookahead(); string(ahead) != one[:10] || at != 42 {
		t.Fatalf("after compaction Lookahead = %q at %d; want %q at 42", ahead, at, one[:10])
	}
	if _, err := r.ReadCommand(); err != io.ErrUnexpectedEOF {
		t.Fatalf("third command: %v, want io.ErrUnexpectedEOF", err)
	}
	if ahead, _ := r.Lookahead(); ahead != nil {
		t.Fatalf("Lookahead after an error = %q, want nil", ahead)
	}
}

// FuzzPeekArgs checks that PeekArgs never panics and that what it reports
// agrees with the Reader: each name and first argument is the Reader's, for
// the same commands in the same order, and the bytes it says they span are
// the bytes the Reader consumed for them.
func FuzzPeekArgs(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$7\r\nACQUIRE\r\n$10\r\nlock:12345\r\n$5\r\n30000\r\n*1\r\n$4\r\nPING\r\n",
		"*2\r\n$0\r\n\r\n$0\r\n\r\n",
		"*1\r\n$4\r\nPING\r\nPING\r\n",
		"*0\r\n*1\r\n$4\r\nPING\r\n",
		"*1\r\n$000000004\r\nPING\r\n",
		"*2\r\n$4\r\nECHO\r\n$8\r\na\r\nb\x00c\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var peeked [][2]string
		span := PeekArgs(in, 1<<20, func(name, arg []byte) {
			peeked = append(peeked, [2]string{string(name), string(arg)})
		})
		if span < 0 || span > len(in) {
			t.Fatalf("span %d of %d bytes", span, len(in))
		}
		r := NewReader(bytes.NewReader(in), DefaultReaderLimits())
		for i, p := range peeked {
			args, err := r.ReadCommand()
			if err != nil {
				t.Fatalf("PeekArgs reported command %d %q, the Reader: %v", i, p, err)
			}
			arg := ""
			if len(args) > 1 {
				arg = string(args[1])
			}
			if string(args[0]) != p[0] || arg != p[1] {
				t.Fatalf("command %d: PeekArgs %q, Reader %q", i, p, args)
			}
		}
		if len(peeked) > 0 {
			if _, at := r.Lookahead(); at != int64(span) {
				t.Fatalf("PeekArgs spans %d bytes, the Reader consumed %d for the same commands", span, at)
			}
		}
	})
}
