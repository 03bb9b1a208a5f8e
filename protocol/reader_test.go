package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// readAllCommands reads commands until the first error and returns copies of
// them with that error (io.EOF after a clean end).
func readAllCommands(rd io.Reader, limits ReaderLimits) ([][]string, error) {
	r := NewReader(rd, limits)
	var cmds [][]string
	for {
		args, err := r.ReadCommand()
		if err != nil {
			return cmds, err
		}
		cmd := make([]string, len(args))
		for i, a := range args {
			cmd[i] = string(a)
		}
		cmds = append(cmds, cmd)
	}
}

// trickleReader returns one byte per Read, the worst split a client can choose.
type trickleReader struct{ data []byte }

func (b *trickleReader) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = b.data[0]
	b.data = b.data[1:]
	return 1, nil
}

// randomChunkReader returns chunks of random sizes between 1 and max bytes.
type randomChunkReader struct {
	data []byte
	rng  *rand.Rand
	max  int
}

func (c *randomChunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(1+c.rng.IntN(c.max), len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// replayReader replays frame forever, one whole frame per Read at most, as a
// client pipelining the same batch would.
type replayReader struct {
	frame []byte
	off   int
}

func (c *replayReader) Read(p []byte) (int, error) {
	n := copy(p, c.frame[c.off:])
	c.off = (c.off + n) % len(c.frame)
	return n, nil
}

// smallReaderLimits keeps error cases short to write.
func smallReaderLimits() ReaderLimits {
	return ReaderLimits{MaxInlineLen: 8, MaxMultibulk: 4, MaxBulkLen: 16, MaxQueryBuffer: 64}
}

func TestReaderValid(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		limits *ReaderLimits // nil means DefaultReaderLimits
		want   [][]string
	}{
		{"resp single", "*1\r\n$4\r\nPING\r\n", nil, [][]string{{"PING"}}},
		{"resp args", "*3\r\n$7\r\nACQUIRE\r\n$10\r\nlock:12345\r\n$5\r\n30000\r\n", nil,
			[][]string{{"ACQUIRE", "lock:12345", "30000"}}},
		{"case untouched", "*1\r\n$4\r\npInG\r\n", nil, [][]string{{"pInG"}}},
		{"empty bulk", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", nil, [][]string{{"ECHO", ""}}},
		{"binary bulk", "*2\r\n$4\r\nECHO\r\n$8\r\na\r\nb\x00c\r\n\r\n", nil, [][]string{{"ECHO", "a\r\nb\x00c\r\n"}}},
		{"bulk that looks like a frame", "*1\r\n$14\r\n*1\r\n$4\r\nPING\r\n\r\n", nil, [][]string{{"*1\r\n$4\r\nPING\r\n"}}},
		{"star zero skipped", "*0\r\n*1\r\n$4\r\nPING\r\n", nil, [][]string{{"PING"}}},
		{"star minus one skipped", "*-1\r\n*-5\r\n*1\r\n$4\r\nPING\r\n", nil, [][]string{{"PING"}}},
		{"star min int64 skipped", "*-9223372036854775808\r\n", nil, nil},
		{"pipelined", "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nQUIT\r\n", nil,
			[][]string{{"PING"}, {"GET", "k"}, {"QUIT"}}},
		{"inline crlf", "PING\r\n", nil, [][]string{{"PING"}}},
		{"inline lf", "SET k v\n", nil, [][]string{{"SET", "k", "v"}}},
		{"inline blank lines skipped", "\r\n\n  \t\r\nPING\n\n", nil, [][]string{{"PING"}}},
		{"inline blanks between args", "  SET \t k\t\tv  \r\n", nil, [][]string{{"SET", "k", "v"}}},
		{"inline cr inside line separates", "a\rb\n", nil, [][]string{{"a", "b"}}},
		{"inline only last cr stripped", "a\r\r\n", nil, [][]string{{"a"}}},
		{"inline vt and ff inside token", "\v\fa\vb c\f\n", nil, [][]string{{"a\vb", "c\f"}}},
		{"inline nul is ordinary", "a\x00b c\n", nil, [][]string{{"a\x00b", "c"}}},
		{"inline star not first", " *1\n", nil, [][]string{{"*1"}}},
		{"double quote escapes", `SET k "a\nb\r\t\b\a\"q\" \\ \x41\x4a\x4b \q"` + "\n", nil,
			[][]string{{"SET", "k", "a\nb\r\t\b\a\"q\" \\ AJK q"}}},
		{"double quote bad hex", `"\xZZ" "\x4" "\x"` + "\n", nil, [][]string{{"xZZ", "x4", "x"}}},
		{"double quote keeps spaces", `"a b  c"` + "\n", nil, [][]string{{"a b  c"}}},
		{"single quotes", `SET k 'it\'s \n "raw"'` + "\n", nil, [][]string{{"SET", "k", `it's \n "raw"`}}},
		{"quote mid token", `SET k"e y" v` + "\n", nil, [][]string{{"SET", "ke y", "v"}}},
		{"empty quoted args", `SET k "" ''` + "\n", nil, [][]string{{"SET", "k", "", ""}}},
		{"lone empty quotes", "\"\"\n", nil, [][]string{{""}}},
		{"closing quote then tab", "\"a\"\tb\n", nil, [][]string{{"a", "b"}}},
		{"closing quote then vt", "'a'\vb\n", nil, [][]string{{"a", "b"}}},
		{"closing quote then cr", "\"a\"\r\n", nil, [][]string{{"a"}}},
		{"mixed inline and resp", "PING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nSET k v\n*1\r\n$4\r\nQUIT\r\n", nil,
			[][]string{{"PING"}, {"GET", "k"}, {"SET", "k", "v"}, {"QUIT"}}},
		{"inline at max length", "0123456\r\n", &ReaderLimits{8, 4, 16, 64, false}, [][]string{{"0123456"}}},
		{"inline at max length lf", "01234567\n", &ReaderLimits{8, 4, 16, 64, false}, [][]string{{"01234567"}}},
		// Eight bytes before the '\r', the most MaxInlineLen allows.
		{"header at max length", "*-100000\r\n*1\r\n$4\r\nPING\r\n", &ReaderLimits{8, 4, 16, 64, false}, [][]string{{"PING"}}},
		{"bulk at max length", "*1\r\n$16\r\n0123456789abcdef\r\n", &ReaderLimits{8, 4, 16, 64, false},
			[][]string{{"0123456789abcdef"}}},
		{"multibulk at max count", "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n", &ReaderLimits{8, 4, 16, 64, false},
			[][]string{{"a", "b", "c", "d"}}},
		{"command at query buffer limit", "*1\r\n$4\r\nPING\r\n", &ReaderLimits{8, 4, 16, 14, false}, [][]string{{"PING"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits := DefaultReaderLimits()
			if tt.limits != nil {
				limits = *tt.limits
			}
			got, err := readAllCommands(strings.NewReader(tt.in), limits)
			if err != io.EOF {
				t.Fatalf("err = %v, want io.EOF (commands so far %q)", err, got)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("commands = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	small := smallReaderLimits()
	preAuth := DefaultReaderLimits()
	preAuth.PreAuth = true
	tests := []struct {
		name    string
		in      string
		limits  ReaderLimits
		wantMsg string
		before  int // commands returned before the error
	}{
		{"too big inline", "012345678", small, "too big inline request", 0},
		{"too big inline with lf after", "012345678\n", small, "too big inline request", 0},
		{"too big inline after a command", "PING\n012345678", small, "too big inline request", 1},
		{"unterminated double quote", `SET "abc` + "\n", small, "unbalanced quotes in request", 0},
		{"unterminated single quote", `'abc` + "\n", small, "unbalanced quotes in request", 0},
		{"escaped closing quote", `"ab\"` + "\n", small, "unbalanced quotes in request", 0},
		{"trailing backslash", `"ab\` + "\n", small, "unbalanced quotes in request", 0},
		{"double quote then letter", `"a"b` + "\n", small, "unbalanced quotes in request", 0},
		{"single quote then letter", `'a'b` + "\n", small, "unbalanced quotes in request", 0},
		{"multibulk not a number", "*x\r\n", small, "invalid multibulk length", 0},
		{"multibulk plus sign", "*+1\r\n", small, "invalid multibulk length", 0},
		{"multibulk leading space", "* 1\r\n", small, "invalid multibulk length", 0},
		{"multibulk trailing space", "*1 \r\n", small, "invalid multibulk length", 0},
		{"multibulk leading zero", "*01\r\n", small, "invalid multibulk length", 0},
		{"multibulk minus zero", "*-0\r\n", small, "invalid multibulk length", 0},
		{"multibulk empty", "*\r\n", small, "invalid multibulk length", 0},
		{"multibulk lone minus", "*-\r\n", small, "invalid multibulk length", 0},
		{"multibulk over limit", "*5\r\n", small, "invalid multibulk length", 0},
		{"multibulk over default limit", "*1048577\r\n", DefaultReaderLimits(), "invalid multibulk length", 0},
		{"multibulk overflow", "*99999999999999999999\r\n", DefaultReaderLimits(), "invalid multibulk length", 0},
		{"multibulk cr without lf", "*1\rX", small, "invalid multibulk length", 0},
		{"too big mbulk count", "*12345678", small, "too big mbulk count string", 0},
		{"expected dollar", "*1\r\nGET\r\n", small, "expected '$', got 'G'", 0},
		{"expected dollar control byte", "*1\r\n\r\n", small, `expected '$', got '\x0d'`, 0},
		{"expected dollar after an arg", "*2\r\n$1\r\na\r\n:1\r\n", small, "expected '$', got ':'", 0},
		{"bulk not a number", "*1\r\n$x\r\n", small, "invalid bulk length", 0},
		{"bulk negative", "*1\r\n$-1\r\n", small, "invalid bulk length", 0},
		{"bulk plus sign", "*1\r\n$+1\r\n", small, "invalid bulk length", 0},
		{"bulk leading zero", "*1\r\n$01\r\nx\r\n", small, "invalid bulk length", 0},
		{"bulk empty", "*1\r\n$\r\n", small, "invalid bulk length", 0},
		{"bulk over limit", "*1\r\n$17\r\n", small, "invalid bulk length", 0},
		{"bulk over default limit", "*1\r\n$536870913\r\n", DefaultReaderLimits(), "invalid bulk length", 0},
		{"bulk max int64", "*1\r\n$9223372036854775807\r\n", DefaultReaderLimits(), "invalid bulk length", 0},
		{"bulk overflow", "*1\r\n$18446744073709551617\r\n", DefaultReaderLimits(), "invalid bulk length", 0},
		{"bulk cr without lf", "*1\r\n$1\rX", small, "invalid bulk length", 0},
		{"too big bulk count", "*1\r\n$12345678", small, "too big bulk count string", 0},
		{"too big bulk count without dollar", "*1\r\nabcdefghi", small, "too big bulk count string", 0},
		{"bulk data without crlf", "*1\r\n$4\r\nPINGxx", small, "expected CRLF after bulk data", 0},
		{"bulk data with cr only", "*1\r\n$4\r\nPING\rX", small, "expected CRLF after bulk data", 0},
		{"bulk data too long", "*1\r\n$3\r\nPING\r\n", small, "expected CRLF after bulk data", 0},
		{"query buffer exceeded by complete command", "*1\r\n$4\r\nPING\r\n", ReaderLimits{8, 4, 16, 13, false}, "query buffer limit exceeded", 0},
		{"query buffer exceeded while pending", "*1\r\n$16\r\n0123456789", ReaderLimits{8, 4, 16, 16, false}, "query buffer limit exceeded", 0},
		{"query buffer exceeded by many args", "*4\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n", ReaderLimits{8, 4, 16, 48, false}, "query buffer limit exceeded", 0},
		{"query buffer after a command", "*1\r\n$1\r\na\r\n*1\r\n$4\r\nPING\r\n", ReaderLimits{8, 4, 16, 13, false}, "query buffer limit exceeded", 1},
		{"pre-auth multibulk over 10", "*11\r\n", preAuth, "unauthenticated multibulk length", 0},
		{"pre-auth multibulk over the limit too", "*1048577\r\n", preAuth, "invalid multibulk length", 0},
		{"pre-auth bulk over 16384", "*1\r\n$16385\r\n", preAuth, "unauthenticated bulk length", 0},
		{"pre-auth bulk negative", "*1\r\n$-1\r\n", preAuth, "invalid bulk length", 0},
		{"pre-auth bulk over the limit too", "*1\r\n$536870913\r\n", preAuth, "invalid bulk length", 0},
		{"pre-auth after a command", "PING\r\n*11\r\n", preAuth, "unauthenticated multibulk length", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in), tt.limits)
			for i := range tt.before {
				if _, err := r.ReadCommand(); err != nil {
					t.Fatalf("command %d: %v", i, err)
				}
			}
			_, err := r.ReadCommand()
			var perr *ProtocolError
			if !errors.As(err, &perr) {
				t.Fatalf("err = %#v, want *ProtocolError", err)
			}
			if perr.Msg != tt.wantMsg {
				t.Fatalf("Msg = %q, want %q", perr.Msg, tt.wantMsg)
			}
			if want := "Protocol error: " + tt.wantMsg; err.Error() != want {
				t.Fatalf("Error() = %q, want %q", err.Error(), want)
			}
			// The reader is dead after a protocol error.
			if _, again := r.ReadCommand(); again != err {
				t.Fatalf("second call err = %v, want the same %v", again, err)
			}
		})
	}
}

// TestReaderPreAuthLimits checks that a Reader made with PreAuth takes
// commands at Redis's pre-auth bounds, and that Authenticated lifts them
// from the next command on, even one already buffered behind AUTH.
func TestReaderPreAuthLimits(t *testing.T) {
	limits := DefaultReaderLimits()
	limits.PreAuth = true
	frame := func(n, size int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", n)
		for range n {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", size, strings.Repeat("x", size))
		}
		return b.String()
	}
	atBounds := frame(PreAuthMaxMultibulk, 1) + frame(1, int(PreAuthMaxBulkLen))
	above := frame(PreAuthMaxMultibulk+1, 1) + frame(1, int(PreAuthMaxBulkLen)+1)
	r := NewReader(strings.NewReader("AUTH pw\r\n"+atBounds+above), limits)
	var got []int
	for {
		args, err := r.ReadCommand()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d commands: %v", len(got), err)
		}
		if len(args) == 2 && string(args[0]) == "AUTH" {
			// Where the server lifts them: before the pipelined commands
			// behind AUTH are parsed.
			r.Authenticated()
		}
		got = append(got, len(args))
	}
	if want := []int{2, PreAuthMaxMultibulk, 1, PreAuthMaxMultibulk + 1, 1}; !slices.Equal(got, want) {
		t.Fatalf("commands' lengths = %v, want %v", got, want)
	}
	// Without Authenticated, the same commands above the bounds fail.
	if _, err := readAllCommands(strings.NewReader(atBounds+above), limits); err == nil || err.Error() != "Protocol error: unauthenticated multibulk length" {
		t.Fatalf("err = %v, want unauthenticated multibulk length", err)
	}
}

// TestReaderRedconRegressions feeds the inputs that break redcon v1.6.2's
// reader: a panic, a multi-second spin, and a stack overflow.
func TestReaderRedconRegressions(t *testing.T) {
	t.Run("max int64 bulk length", func(t *testing.T) {
		_, err := readAllCommands(strings.NewReader("*1\r\n$9223372036854775807\r\nxx\r\n"), DefaultReaderLimits())
		if perr := (*ProtocolError)(nil); !errors.As(err, &perr) || perr.Msg != "invalid bulk length" {
			t.Fatalf("err = %v, want invalid bulk length", err)
		}
	})
	t.Run("ten billion multibulk", func(t *testing.T) {
		start := time.Now()
		_, err := readAllCommands(strings.NewReader("*10000000000\r\n"), DefaultReaderLimits())
		if perr := (*ProtocolError)(nil); !errors.As(err, &perr) || perr.Msg != "invalid multibulk length" {
			t.Fatalf("err = %v, want invalid multibulk length", err)
		}
		t.Logf("refused in %v", time.Since(start))
	})
	t.Run("1 MiB argument one byte per read", func(t *testing.T) {
		arg := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
		frame := fmt.Appendf(nil, "*2\r\n$3\r\nSET\r\n$%d\r\n%s\r\n", len(arg), arg)
		start := time.Now()
		got, err := readAllCommands(&trickleReader{data: frame}, DefaultReaderLimits())
		elapsed := time.Since(start)
		if err != io.EOF {
			t.Fatalf("err = %v, want io.EOF", err)
		}
		if len(got) != 1 || len(got[0]) != 2 || got[0][0] != "SET" || got[0][1] != string(arg) {
			t.Fatalf("did not get SET with the 1 MiB argument back")
		}
		// A quadratic reader takes hours here; this bound only makes the
		// failure readable instead of a test timeout.
		if elapsed > 30*time.Second {
			t.Fatalf("took %v, parsing is not linear", elapsed)
		}
		t.Logf("%d one-byte reads in %v", len(frame), elapsed)
	})
	t.Run("max length inline line one byte per read", func(t *testing.T) {
		limits := DefaultReaderLimits()
		line := append(bytes.Repeat([]byte("a"), limits.MaxInlineLen), '\n')
		got, err := readAllCommands(&trickleReader{data: line}, limits)
		if err != io.EOF || len(got) != 1 || len(got[0][0]) != limits.MaxInlineLen {
			t.Fatalf("got %d commands, err %v", len(got), err)
		}
	})
}

// TestReaderClaimsCostNothing checks that memory follows the bytes received,
// not the count or length a client claims.
func TestReaderClaimsCostNothing(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"huge count", "*1048576\r\n"},
		{"huge count with some args", "*1048576\r\n$1\r\na\r\n$1\r\nb\r\n"},
		{"huge bulk", "*1\r\n$536870911\r\nabc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const runs = 20
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				_, err := NewReader(strings.NewReader(tt.in), DefaultReaderLimits()).ReadCommand()
				if err != io.ErrUnexpectedEOF {
					t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
				}
			}
			runtime.ReadMemStats(&after)
			// The 16 KiB buffer and two 64-entry slices are about 20 KiB.
			perRun := (after.TotalAlloc - before.TotalAlloc) / runs
			if perRun > 64<<10 {
				t.Fatalf("allocated %d bytes per reader, want under 64 KiB", perRun)
			}
			allocs := testing.AllocsPerRun(runs, func() {
				_, _ = NewReader(strings.NewReader(tt.in), DefaultReaderLimits()).ReadCommand()
			})
			if allocs > 6 {
				t.Fatalf("%v allocations per reader, want at most 6", allocs)
			}
		})
	}
}

// readerSplitStreams are valid and invalid streams for the split tests.
var readerSplitStreams = []string{
	"*3\r\n$7\r\nACQUIRE\r\n$10\r\nlock:12345\r\n$5\r\n30000\r\n",
	"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\n*-1\r\nPING\r\n\r\nSET k \"a\\x41\\n\" 'b\\'c'\n",
	"*2\r\n$4\r\nECHO\r\n$8\r\na\r\nb\x00c\r\n\r\n   \n\t\r\n*1\r\n$0\r\n\r\n",
	"PING\nPING\r\nSET   a   b\r\n",
	"*1\r\n$4\r\nPING\r\n*1\r\nPING\r\n",         // expected '$'
	"PING\r\n\"unbalanced\n",                     // unbalanced quotes
	"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING",       // unexpected EOF
	"*1\r\n$4\r\nPING\r\n*1\r\n$99999999999\r\n", // invalid bulk length
}

// TestReaderSplit checks that where reads split the input does not change
// the commands or the final error.
func TestReaderSplit(t *testing.T) {
	// Long enough to need a grown buffer and several compactions.
	var long bytes.Buffer
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		if i%3 == 0 {
			fmt.Fprintf(&long, "SET key:%d \"v\\x%02x\"\r\n", i, i%256)
			continue
		}
		arg := bytes.Repeat([]byte{byte('a' + i%26)}, rng.IntN(40000))
		fmt.Fprintf(&long, "*3\r\n$3\r\nSET\r\n$%d\r\nkey:%d\r\n$%d\r\n%s\r\n", len(fmt.Sprint("key:", i)), i, len(arg), arg)
	}
	streams := append([]string{long.String()}, readerSplitStreams...)

	for i, s := range streams {
		want, wantErr := readAllCommands(strings.NewReader(s), DefaultReaderLimits())
		seeds := uint64(50)
		if len(s) > 1<<20 {
			seeds = 2
		}
		for seed := range seeds {
			for _, max := range []int{1, 3, 17, 1000, 70000} {
				rd := &randomChunkReader{data: []byte(s), rng: rand.New(rand.NewPCG(seed, uint64(i))), max: max}
				got, err := readAllCommands(rd, DefaultReaderLimits())
				if fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Fatalf("stream %d seed %d max %d: err = %v, want %v", i, seed, max, err, wantErr)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("stream %d seed %d max %d: got %d commands, want %d", i, seed, max, len(got), len(want))
				}
			}
		}
	}
}

// failAfterReader returns its data and then err, with the last bytes if withData.
type failAfterReader struct {
	data     []byte
	err      error
	withData bool
}

func (e *failAfterReader) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	if len(e.data) == 0 && e.withData {
		return n, e.err
	}
	return n, nil
}

func TestReaderEOFAndReadErrors(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name     string
		in       string
		err      error
		withData bool
		wantCmds int
		wantErr  error
	}{
		{"empty stream", "", io.EOF, false, 0, io.EOF},
		{"clean end", "PING\r\n", io.EOF, false, 1, io.EOF},
		{"clean end with data", "PING\r\n", io.EOF, true, 1, io.EOF},
		{"blank lines then end", "PING\r\n\r\n\n", io.EOF, true, 1, io.EOF},
		{"eof mid inline", "PING\r\nPIN", io.EOF, false, 1, io.ErrUnexpectedEOF},
		{"eof after blank prefix", "PING\r\n  ", io.EOF, true, 1, io.ErrUnexpectedEOF},
		{"eof mid count", "*1", io.EOF, false, 0, io.ErrUnexpectedEOF},
		{"eof after count", "*1\r\n", io.EOF, true, 0, io.ErrUnexpectedEOF},
		{"eof mid bulk", "*1\r\n$4\r\nPI", io.EOF, false, 0, io.ErrUnexpectedEOF},
		{"eof before final lf", "*1\r\n$4\r\nPING\r", io.EOF, false, 0, io.ErrUnexpectedEOF},
		{"read error at boundary", "PING\r\n", errBoom, false, 1, errBoom},
		{"read error with data", "PING\r\nPING\r\n", errBoom, true, 2, errBoom},
		{"read error mid command", "PING\r\nPI", errBoom, true, 1, errBoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(&failAfterReader{data: []byte(tt.in), err: tt.err, withData: tt.withData}, DefaultReaderLimits())
			for i := range tt.wantCmds {
				if _, err := r.ReadCommand(); err != nil {
					t.Fatalf("command %d: %v", i, err)
				}
			}
			for range 2 { // read errors stick too
				if _, err := r.ReadCommand(); err != tt.wantErr {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			}
		})
	}
}

// stalledReader never makes progress.
type stalledReader struct{ reads int }

func (e *stalledReader) Read([]byte) (int, error) { e.reads++; return 0, nil }

func TestReaderNoProgress(t *testing.T) {
	rd := &stalledReader{}
	_, err := NewReader(rd, DefaultReaderLimits()).ReadCommand()
	if err != io.ErrNoProgress {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
	if rd.reads != readerMaxEmptyReads {
		t.Fatalf("%d reads, want %d", rd.reads, readerMaxEmptyReads)
	}
}

func TestReaderLimitsValidate(t *testing.T) {
	def := DefaultReaderLimits()
	with := func(f func(*ReaderLimits)) ReaderLimits { l := def; f(&l); return l }
	tests := []struct {
		name    string
		limits  ReaderLimits
		wantErr string // empty for valid
	}{
		{"default", def, ""},
		{"bulk above query buffer", with(func(l *ReaderLimits) { l.MaxBulkLen = 2 * l.MaxQueryBuffer }), ""},
		{"inline equals query buffer", ReaderLimits{64, 1, 1, 64, false}, ""},
		{"zero", ReaderLimits{}, "protocol: MaxInlineLen must be positive, got 0"},
		{"zero multibulk", with(func(l *ReaderLimits) { l.MaxMultibulk = 0 }), "protocol: MaxMultibulk must be positive, got 0"},
		{"negative bulk", with(func(l *ReaderLimits) { l.MaxBulkLen = -1 }), "protocol: MaxBulkLen must be positive, got -1"},
		{"zero query buffer", with(func(l *ReaderLimits) { l.MaxQueryBuffer = 0 }), "protocol: MaxQueryBuffer must be positive, got 0"},
		{"inline above query buffer", ReaderLimits{65, 1, 1, 64, false}, "protocol: MaxInlineLen (65) must not exceed MaxQueryBuffer (64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.limits.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
			// The reader reports bad limits instead of guessing.
			if _, rerr := NewReader(strings.NewReader("PING\r\n"), tt.limits).ReadCommand(); rerr == nil || rerr.Error() != tt.wantErr {
				t.Fatalf("ReadCommand() = %v, want %q", rerr, tt.wantErr)
			}
		})
	}
}

func TestReaderSteadyStateAllocs(t *testing.T) {
	frame := acquirePipeline(16)
	r := NewReader(&replayReader{frame: frame}, DefaultReaderLimits())
	for range 100 {
		if _, err := r.ReadCommand(); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.ReadCommand(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per command, want 0", allocs)
	}
}

func TestReaderArgsAreCapped(t *testing.T) {
	r := NewReader(strings.NewReader("*2\r\n$1\r\na\r\n$1\r\nb\r\nSET k v\n"), DefaultReaderLimits())
	for range 2 {
		args, err := r.ReadCommand()
		if err != nil {
			t.Fatal(err)
		}
		first := string(args[1])
		_ = append(args[0], "XYZ"...)
		if string(args[1]) != first {
			t.Fatalf("append to args[0] changed args[1] to %q", args[1])
		}
	}
}

// TestReaderReleasesBigBuffers checks that one huge command does not pin its
// buffer (or its argument slices) for the life of the connection.
func TestReaderReleasesBigBuffers(t *testing.T) {
	var in bytes.Buffer
	in.WriteString("*5000\r\n")
	for range 4999 {
		in.WriteString("$1\r\nx\r\n")
	}
	big := bytes.Repeat([]byte("y"), 4<<20)
	fmt.Fprintf(&in, "$%d\r\n%s\r\n", len(big), big)
	in.WriteString("PING\r\n")
	r := NewReader(&in, DefaultReaderLimits())
	args, err := r.ReadCommand()
	if err != nil || len(args) != 5000 {
		t.Fatalf("got %d args, err %v", len(args), err)
	}
	if args, err = r.ReadCommand(); err != nil || string(args[0]) != "PING" {
		t.Fatalf("got %q, err %v", args, err)
	}
	if _, err = r.ReadCommand(); err != io.EOF {
		t.Fatalf("err = %v, want io.EOF", err)
	}
	if len(r.buf) > readerKeepBuf || cap(r.args) > readerKeepArgs || cap(r.spans) > readerKeepArgs {
		t.Fatalf("kept buffer %d, args %d, spans %d", len(r.buf), cap(r.args), cap(r.spans))
	}
}

func TestParseRESPInt(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"-1", -1, true},
		{"1048576", 1048576, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"18446744073709551615", 0, false},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"-0", 0, false},
		{"00", 0, false},
		{"01", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1a", 0, false},
		{"--1", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRESPInt([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRESPInt(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// acquirePipeline is n pipelined lock acquisitions, as a busy client sends them.
func acquirePipeline(n int) []byte {
	var b []byte
	for range n {
		b = append(b, "*3\r\n$7\r\nACQUIRE\r\n$10\r\nlock:12345\r\n$5\r\n30000\r\n"...)
	}
	return b
}

// BenchmarkReaderPipeline reads batches of pipelined commands, each batch
// arriving in one Read, against redcon's reader as the baseline.
func BenchmarkReaderPipeline(b *testing.B) {
	for _, depth := range []int{1, 16, 128} {
		frame := acquirePipeline(depth)
		b.Run(fmt.Sprintf("leasehold/depth=%d", depth), func(b *testing.B) {
			r := NewReader(&replayReader{frame: frame}, DefaultReaderLimits())
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				for range depth {
					if _, err := r.ReadCommand(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*depth), "ns/cmd")
		})
		b.Run(fmt.Sprintf("redcon/depth=%d", depth), func(b *testing.B) {
			r := redcon.NewReader(&replayReader{frame: frame})
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				for range depth {
					if _, err := r.ReadCommand(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*depth), "ns/cmd")
		})
	}
}

// wouldBlockSource hands out its chunks one per Read and says ErrWouldBlock
// between them, as a non-blocking socket does.
type wouldBlockSource struct {
	chunks []string
	gap    bool
}

func (s *wouldBlockSource) Read(p []byte) (int, error) {
	if s.gap || len(s.chunks) == 0 {
		s.gap = false
		if len(s.chunks) == 0 {
			return 0, io.EOF
		}
		return 0, ErrWouldBlock
	}
	s.gap = true
	n := copy(p, s.chunks[0])
	s.chunks[0] = s.chunks[0][n:]
	if s.chunks[0] == "" {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

func TestReaderWouldBlockKeepsItsPlace(t *testing.T) {
	stream := "*3\r\n$7\r\nACQUIRE\r\n$1\r\nk\r\n$4\r\n1000\r\nPING\r\n*1\r\n$4\r\nPING\r\n"
	var chunks []string
	for i := 0; i < len(stream); i += 3 {
		chunks = append(chunks, stream[i:min(i+3, len(stream))])
	}
	r := NewReader(&wouldBlockSource{chunks: chunks}, DefaultReaderLimits())
	var got []string
	blocks := 0
	for {
		args, err := r.ReadCommand()
		if err == ErrWouldBlock {
			blocks++
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(bytes.Join(args, []byte(" "))))
	}
	want := []string{"ACQUIRE k 1000", "PING", "PING"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if blocks < len(chunks)-1 {
		t.Fatalf("only %d ErrWouldBlock returns for %d chunks", blocks, len(chunks))
	}
}

// TestReaderReadAhead checks that input read ahead, without parsing, comes
// out of ReadCommand as if read then, in order, with the end of the input
// after it; and that the whole buffer is bounded by MaxQueryBuffer.
func TestReaderReadAhead(t *testing.T) {
	var stream strings.Builder
	var want []string
	for i := range 5000 { // well past the initial buffer
		fmt.Fprintf(&stream, "*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n", len(fmt.Sprint(i)), i)
		want = append(want, fmt.Sprintf("ECHO %d", i))
	}
	var chunks []string
	for s := stream.String(); s != ""; {
		n := min(1000, len(s))
		chunks = append(chunks, s[:n])
		s = s[n:]
	}
	r := NewReader(&wouldBlockSource{chunks: chunks}, DefaultReaderLimits())
	reads := 0
	for {
		err := r.ReadAhead()
		if err == io.EOF {
			break
		}
		if err != nil && err != ErrWouldBlock {
			t.Fatal(err)
		}
		if reads++; reads > 10*len(chunks)+10 {
			t.Fatal("ReadAhead never reached the end of the input")
		}
	}
	if r.Buffered() != stream.Len() {
		t.Fatalf("%d bytes buffered, want %d", r.Buffered(), stream.Len())
	}
	var got []string
	for {
		args, err := r.ReadCommand()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(bytes.Join(args, []byte(" "))))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d commands, want %d (first difference near %d)", len(got), len(want), len(got))
	}

	// Complete commands count towards the limit too, once read ahead.
	limits := smallReaderLimits()
	r = NewReader(strings.NewReader(strings.Repeat("PING\r\n", 100)), limits)
	var err error
	for range 100 {
		if err = r.ReadAhead(); err != nil {
			break
		}
	}
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Msg != msgQueryLimit {
		t.Fatalf("ReadAhead past MaxQueryBuffer: %v, want %q", err, msgQueryLimit)
	}
	// One read fills at most the buffer, which starts at readerBufSize.
	if r.Buffered() > max(int(limits.MaxQueryBuffer)+1, readerBufSize) {
		t.Fatalf("buffered %d bytes with a limit of %d", r.Buffered(), limits.MaxQueryBuffer)
	}
	if _, err := r.ReadCommand(); !errors.As(err, &pe) {
		t.Fatalf("ReadCommand after the limit: %v, want the limit's error", err)
	}
}

// TestReaderReadAheadPreAuth checks that a client that has not
// authenticated can have at most PreAuthMaxReadAhead bytes read ahead, and
// that Authenticated restores MaxQueryBuffer.
func TestReaderReadAheadPreAuth(t *testing.T) {
	input := strings.Repeat("PING\r\n", int(2*PreAuthMaxReadAhead)/6)
	readAhead := func(r *Reader) error {
		for range 10000 {
			if err := r.ReadAhead(); err != nil {
				return err
			}
		}
		t.Fatal("ReadAhead never stopped")
		return nil
	}
	limits := DefaultReaderLimits()
	limits.PreAuth = true
	r := NewReader(strings.NewReader(input), limits)
	var pe *ProtocolError
	if err := readAhead(r); !errors.As(err, &pe) || pe.Msg != msgQueryLimit {
		t.Fatalf("ReadAhead before AUTH: %v, want %q", err, msgQueryLimit)
	}
	if r.Buffered() > 2*int(PreAuthMaxReadAhead) {
		t.Fatalf("buffered %d bytes before AUTH, bound %d", r.Buffered(), PreAuthMaxReadAhead)
	}

	r = NewReader(strings.NewReader(input), limits)
	r.Authenticated()
	if err := readAhead(r); err != io.EOF {
		t.Fatalf("ReadAhead after AUTH: %v, want the whole input and io.EOF", err)
	}
	if r.Buffered() != len(input) {
		t.Fatalf("buffered %d of %d bytes", r.Buffered(), len(input))
	}
}

// TestReaderReadAheadMovesLittle checks that reading ahead does not move the
// input already read ahead on every read, as fill's compaction would: for a
// client that writes megabytes before it reads, that was quadratic.
func TestReaderReadAheadMovesLittle(t *testing.T) {
	chunks := []string{"PING\r\nPING\r\n"}
	for range 256 {
		chunks = append(chunks, strings.Repeat("PING\r\n", 4096/6))
	}
	r := NewReader(&wouldBlockSource{chunks: chunks}, DefaultReaderLimits())
	for {
		if _, err := r.ReadCommand(); err == nil {
			break
		} else if err != ErrWouldBlock {
			t.Fatal(err)
		}
	}
	for range 10 * len(chunks) {
		if err := r.ReadAhead(); err == io.EOF {
			break
		}
	}
	// The first PING was consumed; the rest grew the buffer without being
	// moved to the front to drop those 6 bytes.
	if r.base != 0 || r.Buffered() != 6+256*(4096/6)*6 {
		t.Fatalf("base %d (bytes dropped by compaction), %d buffered", r.base, r.Buffered())
	}
}
