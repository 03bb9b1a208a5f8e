package protocol

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// scriptedReader hands out data in chunks of the given sizes (cycled) and
// counts what it handed out. A read never crosses from one chunk into the
// next; a chunk larger than the caller's buffer takes several reads.
type scriptedReader struct {
	data      []byte
	sizes     []int
	i, left   int // the chunk being handed out, and its bytes not yet read
	delivered int
}

func (s *scriptedReader) Read(p []byte) (int, error) {
	if s.delivered == len(s.data) {
		return 0, io.EOF
	}
	if s.left == 0 {
		s.left = s.sizes[s.i%len(s.sizes)]
		s.i++
	}
	n := min(s.left, len(p), len(s.data)-s.delivered)
	copy(p, s.data[s.delivered:s.delivered+n])
	s.delivered += n
	s.left -= n
	return n, nil
}

type peeked struct{ name, arg string }

// checkLookaheadStream reads every command of src the way server/conn.go's
// runCommands does (peek after a command when the stream offset has reached
// what was peeked before) and checks, after every command:
//
//   - Lookahead's bytes are exactly the input from its offset to the end of
//     what the source has handed out, so its offset is right and it shows
//     nothing that is not really after the command just returned;
//   - offsets only grow;
//   - each command PeekArgs reported is the command the Reader returns next,
//     and after the last of them the Reader stands at the end of PeekArgs'
//     span. Under strict limits the Reader may refuse a reported command
//     instead (a *ProtocolError that ends the connection), never read it
//     differently; under the default limits it must not refuse one.
//
// It reports whether the Reader's buffer grew and shrank on the way.
func checkLookaheadStream(t *testing.T, src *scriptedReader, limits ReaderLimits, strict bool) (grew, shrank bool) {
	t.Helper()
	in := src.data
	r := NewReader(src, limits)
	bufLen := len(r.buf)
	var want []peeked
	var wantEnd, prevAt, prefetchedTo int64 = 0, -1, 0
	for range len(in) + 1 {
		args, err := r.ReadCommand()
		grew, shrank = grew || len(r.buf) > bufLen, shrank || len(r.buf) < bufLen
		bufLen = len(r.buf)
		if err != nil {
			var pe *ProtocolError
			if len(want) > 0 && !(strict && errors.As(err, &pe)) {
				t.Fatalf("PeekArgs reported %q next, the Reader: %v", want, err)
			}
			if ahead, _ := r.Lookahead(); errors.As(err, &pe) && ahead != nil {
				t.Fatalf("Lookahead after %v = %q, want nil", err, ahead)
			}
			return grew, shrank
		}
		ahead, at := r.Lookahead()
		if at <= prevAt {
			t.Fatalf("Lookahead offset %d after %d", at, prevAt)
		}
		prevAt = at
		if at+int64(len(ahead)) != int64(src.delivered) || !bytes.Equal(ahead, in[at:src.delivered]) {
			t.Fatalf("Lookahead = %q at %d; the input there (%d bytes handed out) is %q",
				ahead, at, src.delivered, in[min(int(at), src.delivered):src.delivered])
		}
		if len(want) > 0 {
			arg := ""
			if len(args) > 1 {
				arg = string(args[1])
			}
			if string(args[0]) != want[0].name || arg != want[0].arg {
				t.Fatalf("PeekArgs reported %q next, the Reader returned %q", want[0], args)
			}
			want = want[1:]
			if len(want) == 0 && at != wantEnd {
				t.Fatalf("PeekArgs' commands end at %d, the Reader's at %d", wantEnd, at)
			}
		}
		if len(ahead) > 0 && at >= prefetchedTo {
			if len(want) > 0 {
				t.Fatalf("peeking again at %d with %q still expected", at, want)
			}
			span := PeekArgs(ahead, 16, func(name, arg []byte) {
				want = append(want, peeked{string(name), string(arg)})
			})
			if span < 0 || span > len(ahead) || (span == 0) != (len(want) == 0) {
				t.Fatalf("PeekArgs spans %d of %d bytes for %d commands", span, len(ahead), len(want))
			}
			prefetchedTo = at + int64(span)
			wantEnd = prefetchedTo
		}
	}
	t.Fatal("the Reader returned more commands than the input has bytes")
	return
}

// FuzzLookaheadStream extends FuzzPeekArgs to what the server does: the
// input arrives in reads of varying sizes (so the buffer is compacted under
// pending commands), PeekArgs runs on Lookahead after a command rather than
// on the start of the input, and the Reader may have limits far below the
// defaults (which PeekArgs does not know).
func FuzzLookaheadStream(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n*2\r\n$6\r\nSTATUS\r\n$1\r\nk\r\n*2\r\n$6\r\nSTATUS\r\n$1\r\nk\r\n",
		"*1\r\n$4\r\nPING\r\nPING\r\n\r\n\n*0\r\n*-1\r\n*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n",
		"*3\r\n$7\r\nACQUIRE\r\n$10\r\nlock:12345\r\n$5\r\n30000\r\n*3\r\n$7\r\nACQUIRE\r\n$10\r\nlock:67890\r\n$5\r\n30000\r\n",
		"PING\r\n*2\r\n$4\r\nECHO\r\n$40\r\n0123456789012345678901234567890123456789\r\n*1\r\n$4\r\nPING\r\n",
		"*1\r\n$4\r\nPING\r\n*9\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n",
		"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
	} {
		f.Add([]byte(s), uint16(7), uint32(0))
		f.Add([]byte(s), uint16(1), uint32(0x0103_0502))
		f.Add([]byte(s), uint16(300), uint32(0x4010_2004))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint16, lim uint32) {
		rng := rand.New(rand.NewPCG(uint64(chunk), uint64(lim)))
		maxChunk := 1 + int(chunk)%512
		sizes := make([]int, 1+int(chunk)%7)
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(maxChunk)
		}
		limits, strict := DefaultReaderLimits(), lim != 0
		if strict {
			limits = ReaderLimits{
				MaxInlineLen:   1 + int(lim&0x3f),
				MaxMultibulk:   1 + int(lim>>8&0xf),
				MaxBulkLen:     1 + int64(lim>>16&0x3f),
				MaxQueryBuffer: 64 + int64(lim>>24),
			}
		}
		checkLookaheadStream(t, &scriptedReader{data: in, sizes: sizes}, limits, strict)
	})
}

// TestLookaheadBufferGrowthAndShrink covers the Reader paths the fuzz inputs
// are too small to reach: the buffer doubling under a command longer than
// it, and a large buffer dropped for a small one when a read starts at a
// command boundary.
func TestLookaheadBufferGrowthAndShrink(t *testing.T) {
	frame := func(args ...string) string {
		var b strings.Builder
		b.WriteString("*" + itoa(len(args)) + "\r\n")
		for _, a := range args {
			b.WriteString("$" + itoa(len(a)) + "\r\n" + a + "\r\n")
		}
		return b.String()
	}
	var small strings.Builder
	for i := range 40 {
		small.WriteString(frame("ACQUIRE", "k"+itoa(i), "1000"))
		if i%7 == 0 {
			small.WriteString("PING\r\n\r\n*0\r\n")
		}
	}
	big := frame("ECHO", strings.Repeat("x", 3<<20)) // grows the buffer to 4 MB
	in := small.String() + big + small.String() + big[:100]
	// Reads: the small commands and the start of the big one; the rest of it
	// in large reads; exactly up to the big command's end, so that the next
	// read finds the buffer drained and shrinks it; then small reads.
	first := len(small.String()) + 5000
	rest := len(big) - 5000
	sizes := []int{first, rest / 2, rest - rest/2}
	for range 200 {
		sizes = append(sizes, 37)
	}
	// Once the sizes wrap around, they no longer line up with commands; by
	// then the input has ended.
	if grew, shrank := checkLookaheadStream(t, &scriptedReader{data: []byte(in), sizes: sizes}, DefaultReaderLimits(), false); !grew || !shrank {
		t.Fatalf("the buffer grew: %v, shrank: %v; the test means to cover both", grew, shrank)
	}
}

// TestPeekArgsBeyondReaderLimits records where PeekArgs reports a command
// that the Reader refuses even under the default limits: it does not know
// ReaderLimits, so an array of more than MaxMultibulk elements, all
// buffered, is a command to it and a protocol error to the Reader (likewise
// a bulk longer than MaxBulkLen, above 512 MB, not built here). That is a
// hint wasted on a connection about to be closed, nothing more: the Reader
// refuses, it never reads the bytes differently.
func TestPeekArgsBeyondReaderLimits(t *testing.T) {
	limits := DefaultReaderLimits()
	var b bytes.Buffer
	b.WriteString("*" + itoa(limits.MaxMultibulk+1) + "\r\n$7\r\nACQUIRE\r\n$3\r\nkey\r\n")
	for range limits.MaxMultibulk - 1 {
		b.WriteString("$0\r\n\r\n")
	}
	var got []peeked
	span := PeekArgs(b.Bytes(), 16, func(name, arg []byte) { got = append(got, peeked{string(name), string(arg)}) })
	if span != b.Len() || len(got) != 1 || got[0] != (peeked{"ACQUIRE", "key"}) {
		t.Fatalf("PeekArgs = %q spanning %d of %d", got, span, b.Len())
	}
	_, err := NewReader(bytes.NewReader(b.Bytes()), limits).ReadCommand()
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Msg != msgBadMultibulk {
		t.Fatalf("the Reader: %v, want %q", err, msgBadMultibulk)
	}
}

// TestPeekArgsLengthsAtTheEdge puts bulk lengths at, just below and just
// past the end of the buffer, and nine-digit ones, where an off-by-one would
// index out of range.
func TestPeekArgsLengthsAtTheEdge(t *testing.T) {
	for _, in := range []string{
		"*1\r\n$4\r\nPING\r\n",
		"*1\r\n$4\r\nPING\r",
		"*1\r\n$4\r\nPING",
		"*1\r\n$5\r\nPING\r\n",
		"*1\r\n$6\r\nPING\r\n",
		"*1\r\n$7\r\nPING\r\n",
		"*1\r\n$3\r\nPING\r\n",
		"*1\r\n$999999999\r\n",
		"*1\r\n$999999999\r\nPING\r\n",
		"*999999999\r\n$4\r\nPING\r\n",
		"*999999999\r\n",
		"*1\r\n$",
		"*1\r\n$4",
		"*1\r\n$4\r",
		"*1",
		"*",
		"*1\r\n$0\r\n\r",
		"*1\r\n$0\r\n\r\n",
	} {
		for cut := 0; cut <= len(in); cut++ {
			b := []byte(in[:cut])
			n := PeekArgs(b[:len(b):len(b)], 16, func(name, arg []byte) {})
			if n != 0 && n != len(b) {
				t.Fatalf("PeekArgs(%q) spans %d", b, n)
			}
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
