package bin

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errShort = errors.New("short")

func TestRoundTripAndStickyError(t *testing.T) {
	b := binary.AppendUvarint(nil, 300)
	b = binary.AppendVarint(b, -5)
	b = AppendBytes(b, []byte("key"))
	b = AppendBool(b, true)
	b = append(b, 7)
	d := Decoder{B: b, Short: errShort}
	if d.Uvarint() != 300 || d.Varint() != -5 || string(d.Bytes()) != "key" || d.Byte() != 1 || d.Byte() != 7 || d.Err != nil || d.More() {
		t.Fatalf("round trip: %+v", d)
	}
	for n := range len(b) {
		d := Decoder{B: b[:n], Short: errShort}
		d.Uvarint()
		d.Varint()
		d.Bytes()
		d.Byte()
		d.Byte()
		if !errors.Is(d.Err, errShort) {
			t.Errorf("reading %d of %d bytes: Err %v, want short", n, len(b), d.Err)
		}
		if d.Uvarint() != 0 || d.Bytes() != nil || d.Byte() != 0 {
			t.Error("a read after a failure returned something")
		}
	}
	d = Decoder{B: AppendBytes(nil, []byte("abc"))[:2], Short: errShort}
	if d.Bytes() != nil || d.Err == nil {
		t.Error("bytes longer than the input were read")
	}
}
