package slowlog

import (
	"testing"
	"time"
)

// TestLogKeepsNewest: a Log keeps its newest entries, hands them newest
// first, and copies arguments out of the caller's buffer.
func TestLogKeepsNewest(t *testing.T) {
	l := New(2)
	buf := make([]byte, 3)
	for _, name := range []string{"one", "two", "six"} {
		copy(buf, name)
		l.Add([][]byte{[]byte("ECHO"), buf}, 3*time.Microsecond, "addr", "client")
	}
	got := l.Newest(10)
	if len(got) != 2 || l.Len() != 2 || got[0].ID != 2 || got[1].ID != 1 || got[0].Argv[1] != "six" || got[1].Argv[1] != "two" || got[0].Micros != 3 {
		t.Fatalf("Newest = %+v", got)
	}
	l.Reset()
	if l.Len() != 0 {
		t.Fatal("entries after Reset")
	}
	none := New(0)
	none.Add([][]byte{[]byte("ECHO")}, 0, "", "")
	if none.Len() != 0 {
		t.Fatal("a Log of length 0 kept an entry")
	}
}
