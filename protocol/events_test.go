package protocol

import (
	"testing"

	"github.com/leasehold/leasehold/locker"
)

func TestParseEventFrame(t *testing.T) {
	frame := []byte("*4\r\n$8\r\npmessage\r\n$10\r\n__lock__:*\r\n$10\r\n__lock__:k\r\n$14\r\nreleased 7 o p\r\n")
	ev, rest, err := ParseEventFrame(append(frame, frame...))
	if err != nil || len(rest) != len(frame) {
		t.Fatalf("err %v, rest %q", err, rest)
	}
	if want := (locker.Event{Kind: locker.EventReleased, Key: "k", Token: 7, Owner: "o p"}); ev != want {
		t.Fatalf("event %+v, want %+v", ev, want)
	}
	for _, bad := range []string{"", "+OK\r\n", "*4\r\n$8\r\npmessage\r\n", "*4\r\n$99\r\nx\r\n"} {
		if _, _, err := ParseEventFrame([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
