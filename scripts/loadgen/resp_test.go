package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestWriter(t *testing.T) {
	var b []byte
	b = appendArray(b, 3)
	b = appendBulk(b, []byte("ACQUIRE"))
	b = appendBulk(b, []byte("k"))
	b = appendBulkInt(b, 30000)
	b = appendCommand(b, "PING")
	b = appendBulk(b, nil)
	want := "*3\r\n$7\r\nACQUIRE\r\n$1\r\nk\r\n$5\r\n30000\r\n*1\r\n$4\r\nPING\r\n$0\r\n\r\n"
	if string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
}

func TestTargetCommands(t *testing.T) {
	lh, rd := &target{}, &target{redis: true, sha: "abc"}
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"leasehold acquire", lh.appendAcquire(nil, []byte("k"), nil, 500), "*3\r\n$7\r\nACQUIRE\r\n$1\r\nk\r\n$3\r\n500\r\n"},
		{"leasehold release", lh.appendRelease(nil, []byte("k"), nil, 42), "*3\r\n$7\r\nRELEASE\r\n$1\r\nk\r\n$2\r\n42\r\n"},
		{"redis acquire", rd.appendAcquire(nil, []byte("k"), []byte("t"), 500), "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nt\r\n$2\r\nNX\r\n$2\r\nPX\r\n$3\r\n500\r\n"},
		{"redis release", rd.appendRelease(nil, []byte("k"), []byte("t"), 0), "*5\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$1\r\nk\r\n$1\r\nt\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestReader(t *testing.T) {
	big := strings.Repeat("x", 100)
	stream := "+OK\r\n-ERR bad thing\r\n:1882507705379192833\r\n:-5\r\n$-1\r\n$5\r\nhello\r\n$0\r\n\r\n" +
		"*2\r\n$1\r\na\r\n*2\r\n:1\r\n$-1\r\n*-1\r\n$100\r\n" + big + "\r\n+last\r\n"
	want := []string{"+OK", "-ERR bad thing", "1882507705379192833", "-5", "(nil)", "$hello", "$", "array(2)", "(nil)", "$" + big, "+last"}
	for name, src := range map[string]io.Reader{
		"whole":       strings.NewReader(stream),
		"byte a read": iotest.OneByteReader(strings.NewReader(stream)),
	} {
		t.Run(name, func(t *testing.T) {
			// A 32-byte buffer forces the large bulk through the copy path.
			rr := newRespReader(src, 32)
			for i, w := range want {
				r, err := rr.read()
				if err != nil {
					t.Fatalf("reply %d: %v", i, err)
				}
				if got := r.String(); got != w {
					t.Fatalf("reply %d: got %q, want %q", i, got, w)
				}
			}
			if _, err := rr.read(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last reply: %v, want EOF", err)
			}
		})
	}
}

func TestReaderRejects(t *testing.T) {
	for _, in := range []string{
		"?what\r\n",
		":12x\r\n",
		"$-2\r\n",
		"$3\r\nabcde\r\n",
		"+no cr\n",
		"*1\r\n" + strings.Repeat("*1\r\n", maxNesting) + ":1\r\n",
	} {
		rr := newRespReader(strings.NewReader(in), 64)
		if _, err := rr.read(); !errors.Is(err, errProtocol) {
			t.Errorf("%q: got %v, want a protocol error", in, err)
		}
	}
}

func TestParseInt(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "42": 42, "-1": -1, "9223372036854775807": 1<<63 - 1} {
		if v, ok := parseInt([]byte(in)); !ok || v != want {
			t.Errorf("parseInt(%q) = %d, %v", in, v, ok)
		}
	}
	for _, in := range []string{"", "-", "1a", "9223372036854775808", "+1"} {
		if _, ok := parseInt([]byte(in)); ok {
			t.Errorf("parseInt(%q) accepted", in)
		}
	}
}

func TestInfoField(t *testing.T) {
	info := []byte("# Locks\r\nlocks:7\r\nleases_held:1000\r\nwheel_tick_ms:10\r\n")
	if v, ok := infoField(info, "leases_held:"); !ok || v != 1000 {
		t.Fatalf("leases_held = %d, %v", v, ok)
	}
	if v, ok := infoField([]byte("# Keyspace\r\ndb0:keys=12,expires=12,avg_ttl=5\r\n"), "db0:keys="); !ok || v != 12 {
		t.Fatalf("db0 keys = %d, %v", v, ok)
	}
	if _, ok := infoField(info, "missing:"); ok {
		t.Fatal("found a missing field")
	}
}

func TestToken(t *testing.T) {
	r := rng(1)
	a, b := appendToken(nil, &r), appendToken(nil, &r)
	if len(a) != 16 || bytes.Equal(a, b) {
		t.Fatalf("tokens %q, %q: want two different 16-digit tokens", a, b)
	}
}

func BenchmarkCycleEncodeDecode(b *testing.B) {
	lh := &target{}
	key := []byte("cycle:123456")
	var buf []byte
	reply := strings.Repeat(":1882507705379192833\r\n", 1024)
	rr := newRespReader(strings.NewReader(""), 64<<10)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = lh.appendAcquire(buf[:0], key, nil, 30000)
		if i%1024 == 0 {
			rr.br.Reset(strings.NewReader(reply))
		}
		if _, err := rr.read(); err != nil {
			b.Fatal(err)
		}
	}
}
