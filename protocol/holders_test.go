package protocol

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/tidwall/redcon"
)

func TestParseHolders(t *testing.T) {
	tests := []struct {
		name string
		line string
		want HoldersRequest
		err  error
	}{
		{"cursor only", "HOLDERS k 0", HoldersRequest{Key: []byte("k"), Count: DefaultHoldersCount}, nil},
		{"count", "HOLDERS k 42 COUNT 5", HoldersRequest{Key: []byte("k"), Cursor: 42, Count: 5}, nil},
		{"lower case", "holders k 0 count 1", HoldersRequest{Key: []byte("k"), Count: 1}, nil},
		{"largest count", "HOLDERS k 0 COUNT 1000", HoldersRequest{Key: []byte("k"), Count: MaxHoldersCount}, nil},
		{"largest cursor", "HOLDERS k 18446744073709551615", HoldersRequest{Key: []byte("k"), Cursor: math.MaxUint64, Count: DefaultHoldersCount}, nil},
		{"a key named like the option", "HOLDERS COUNT 0 COUNT 2", HoldersRequest{Key: []byte("COUNT"), Count: 2}, nil},

		{"cursor negative", "HOLDERS k -1", HoldersRequest{}, ErrBadCursor},
		{"cursor not a number", "HOLDERS k x", HoldersRequest{}, ErrBadCursor},
		{"cursor overflows uint64", "HOLDERS k 18446744073709551616", HoldersRequest{}, ErrBadCursor},
		{"count zero", "HOLDERS k 0 COUNT 0", HoldersRequest{}, ErrBadHoldersCount},
		{"count negative", "HOLDERS k 0 COUNT -1", HoldersRequest{}, ErrBadHoldersCount},
		{"count above the limit", "HOLDERS k 0 COUNT 1001", HoldersRequest{}, ErrBadHoldersCount},
		{"count not a number", "HOLDERS k 0 COUNT x", HoldersRequest{}, ErrNotInteger},
		{"COUNT without value", "HOLDERS k 0 COUNT", HoldersRequest{}, ErrSyntax},
		{"unknown option", "HOLDERS k 0 MATCH a", HoldersRequest{}, ErrSyntax},
		{"repeated COUNT", "HOLDERS k 0 COUNT 5 COUNT 6", HoldersRequest{}, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHolders(cmdArgs(tt.line))
			checkParseError(t, err, tt.err)
			if tt.err == nil && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if ErrBadHoldersCount.Error() != "ERR COUNT must be between 1 and 1000" {
		t.Fatalf("ErrBadHoldersCount reads %q", ErrBadHoldersCount.Error())
	}
}

func TestWriteHolders(t *testing.T) {
	tests := []struct {
		name    string
		next    uint64
		holders []locker.Holder
		want    string
	}{
		{"done, none", 0, nil, "*2\r\n$1\r\n0\r\n*0\r\n"},
		{"a page, more to come", 12, []locker.Holder{
			{Token: 11, Owner: "reader-1", TTL: 1500 * time.Microsecond, Shared: true},
			{Token: 12, TTL: 30 * time.Second},
		}, "*2\r\n$2\r\n12\r\n*2\r\n" + holderEntry("11", "reader-1", "2") + holderEntry("12", "", "30000")},
		{"largest cursor", math.MaxUint64, []locker.Holder{{Token: math.MaxUint64, Owner: "o", TTL: time.Nanosecond}},
			"*2\r\n$20\r\n18446744073709551615\r\n*1\r\n" + holderEntry("18446744073709551615", "o", "1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := written(t, func(w *redcon.Writer) { WriteHolders(w, tt.next, tt.holders, nil) })
			if got != tt.want {
				t.Fatalf("WriteHolders(%d, %+v)\n got %q\nwant %q", tt.next, tt.holders, got, tt.want)
			}
		})
	}
}

func TestHoldersCommand(t *testing.T) {
	c := Lookup([]byte("HOLDERS"))
	if c == nil {
		t.Fatal("no HOLDERS in the command table")
	}
	if got, want := c.Usage(), "HOLDERS key cursor [COUNT count]"; got != want {
		t.Fatalf("Usage() = %q, want %q", got, want)
	}
	for n, ok := range map[int]bool{1: false, 2: false, 3: true, 5: true, 6: true} {
		if err := c.CheckArity(n); (err == nil) != ok {
			t.Errorf("CheckArity(%d) = %v", n, err)
		}
	}
	if c.FirstKey != 1 || c.LastKey != 1 || c.Step != 1 || !strings.Contains(fmt.Sprint(c.Flags), "readonly") {
		t.Errorf("keys %d,%d,%d flags %v", c.FirstKey, c.LastKey, c.Step, c.Flags)
	}
	// STATUS's list and HOLDERS's default page are the same size, so the
	// first page is what STATUS showed.
	if DefaultHoldersCount != locker.StatusHolders {
		t.Errorf("DefaultHoldersCount %d, STATUS lists %d", DefaultHoldersCount, locker.StatusHolders)
	}
}
