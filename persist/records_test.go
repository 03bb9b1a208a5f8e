package persist

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// encodedEntry is one entry of every kind the format has, with the entry
// decoding must give back.
type encodedEntry struct {
	name string
	enc  []byte
	want entry
}

func encodingCases() []encodedEntry {
	long := bytes.Repeat([]byte("k"), 70000) // past a uint16 and a 2-byte varint
	longOwner := bytes.Repeat([]byte("o"), 300)
	opts := locker.CreateOptions{DefaultTTL: 5 * time.Second, LockDelay: 3 * time.Second, LockDelaySet: true, Limit: 7}
	change := func(c locker.Change, wall int64) []byte { return appendChange(nil, &c, wall) }
	lock := func(key []byte, m lockModel) []byte { return appendLock(nil, key, &m) }
	return []encodedEntry{
		{"create default options", change(locker.Change{Kind: locker.ChangeCreate, Key: []byte("a")}, 0),
			entry{kind: kindCreate, key: []byte("a")}},
		{"create all options", change(locker.Change{Kind: locker.ChangeCreate, Key: []byte("a"), Options: opts}, 0),
			entry{kind: kindCreate, key: []byte("a"), options: opts}},
		{"create lock-delay set to zero", change(locker.Change{Kind: locker.ChangeCreate, Key: []byte("a"), Options: locker.CreateOptions{LockDelaySet: true}}, 0),
			entry{kind: kindCreate, key: []byte("a"), options: locker.CreateOptions{LockDelaySet: true}}},
		{"create max limit", change(locker.Change{Kind: locker.ChangeCreate, Key: []byte("a"), Options: locker.CreateOptions{Limit: locker.MaxLimit}}, 0),
			entry{kind: kindCreate, key: []byte("a"), options: locker.CreateOptions{Limit: locker.MaxLimit}}},
		{"delete", change(locker.Change{Kind: locker.ChangeDelete, Key: []byte("gone")}, 0),
			entry{kind: kindDelete, key: []byte("gone")}},
		{"delete long key", change(locker.Change{Kind: locker.ChangeDelete, Key: long}, 0),
			entry{kind: kindDelete, key: long}},
		{"grant exclusive with owner", change(locker.Change{Kind: locker.ChangeGrant, Key: []byte("a"), Token: 1 << 40, Owner: []byte("me")}, 1_700_000_000_000_000_000),
			entry{kind: kindGrant, key: []byte("a"), token: 1 << 40, deadline: 1_700_000_000_000_000_000, owner: []byte("me")}},
		{"grant shared empty owner", change(locker.Change{Kind: locker.ChangeGrant, Key: []byte("a"), Token: 1, Shared: true}, 5),
			entry{kind: kindGrant, key: []byte("a"), token: 1, deadline: 5, shared: true}},
		{"grant negative deadline", change(locker.Change{Kind: locker.ChangeGrant, Key: []byte("a"), Token: 2}, -12345),
			entry{kind: kindGrant, key: []byte("a"), token: 2, deadline: -12345}},
		{"grant extremes", change(locker.Change{Kind: locker.ChangeGrant, Key: long, Token: math.MaxUint64, Owner: longOwner}, math.MinInt64),
			entry{kind: kindGrant, key: long, token: math.MaxUint64, deadline: math.MinInt64, owner: longOwner}},
		{"grant deadline uses the wall argument, not Change.Deadline", change(locker.Change{Kind: locker.ChangeGrant, Key: []byte("a"), Token: 3, Deadline: 99}, math.MaxInt64),
			entry{kind: kindGrant, key: []byte("a"), token: 3, deadline: math.MaxInt64}},
		{"extend", change(locker.Change{Kind: locker.ChangeExtend, Key: []byte("a"), Token: 77}, 1234567),
			entry{kind: kindExtend, key: []byte("a"), token: 77, deadline: 1234567}},
		{"release", change(locker.Change{Kind: locker.ChangeRelease, Key: []byte("a"), Token: 78}, 0),
			entry{kind: kindRelease, key: []byte("a"), token: 78}},
		{"reserve", appendReserve(nil, 1<<52), entry{kind: kindReserve, token: 1 << 52}},
		{"reserve zero", appendReserve(nil, 0), entry{kind: kindReserve}},
		{"header", appendHeader(nil, 123456789), entry{kind: kindHeader, token: 123456789}},
		{"header of version 1, without time marks", []byte{kindHeader, 0, 1, 7}, entry{kind: kindHeader, token: 7}},
		{"time mark", appendTimeMark(nil, timeMark{bootID: "0e5a8f5c-3b7e-4d8e-9f00-5c1f2d0b8a11", boottime: int64(400 * time.Hour), wall: 1_780_000_000_000_000_000, stamp: 1_780_000_123_000_000_000}),
			entry{kind: kindTime, mark: timeMark{bootID: "0e5a8f5c-3b7e-4d8e-9f00-5c1f2d0b8a11", boottime: int64(400 * time.Hour), wall: 1_780_000_000_000_000_000, stamp: 1_780_000_123_000_000_000}}},
		{"time mark without a boot id, negative wall", appendTimeMark(nil, timeMark{wall: -5, stamp: math.MaxInt64}),
			entry{kind: kindTime, mark: timeMark{wall: -5, stamp: math.MaxInt64}}},
		{"lock empty", lock([]byte("e"), lockModel{}), entry{kind: kindLock, key: []byte("e")}},
		{"lock created no leases", lock([]byte("c"), lockModel{created: true, options: opts, lastToken: 9}),
			entry{kind: kindLock, key: []byte("c"), lock: lockModel{created: true, options: opts, lastToken: 9}}},
		{"lock with leases", lock(long, lockModel{created: true, options: locker.CreateOptions{Limit: 3}, lastToken: 12, leases: []leaseModel{
			{token: 10, deadline: 100, owner: []byte("x")},
			{token: 11, deadline: -1},
			{token: 12, deadline: math.MaxInt64, owner: longOwner, shared: true},
		}}), entry{kind: kindLock, key: long, lock: lockModel{created: true, options: locker.CreateOptions{Limit: 3}, lastToken: 12, leases: []leaseModel{
			{token: 10, deadline: 100, owner: []byte("x")},
			{token: 11, deadline: -1},
			{token: 12, deadline: math.MaxInt64, owner: longOwner, shared: true},
		}}}},
	}
}

func entriesEqual(a, b entry) bool {
	if a.kind != b.kind || !bytes.Equal(a.key, b.key) || a.token != b.token || a.deadline != b.deadline ||
		!bytes.Equal(a.owner, b.owner) || a.shared != b.shared || a.options != b.options || a.mark != b.mark {
		return false
	}
	return lockModelsEqual(&a.lock, &b.lock, true)
}

func lockModelsEqual(a, b *lockModel, order bool) bool {
	if a.created != b.created || a.options != b.options || a.lastToken != b.lastToken || len(a.leases) != len(b.leases) {
		return false
	}
	x, y := a.leases, b.leases
	if !order {
		x, y = sortedLeases(x), sortedLeases(y)
	}
	for i := range x {
		if x[i].token != y[i].token || x[i].deadline != y[i].deadline || !bytes.Equal(x[i].owner, y[i].owner) || x[i].shared != y[i].shared {
			return false
		}
	}
	return true
}

func TestEncodingRoundTrip(t *testing.T) {
	for _, c := range encodingCases() {
		t.Run(c.name, func(t *testing.T) {
			d := newDecoder(c.enc)
			if !d.More() {
				t.Fatal("more() false on an encoded entry")
			}
			got, err := d.next()
			if err != nil {
				t.Fatalf("next: %v", err)
			}
			if !entriesEqual(got, c.want) {
				t.Fatalf("decoded %+v\nwant    %+v", got, c.want)
			}
			if d.More() || len(d.B) != 0 {
				t.Fatalf("%d bytes left after the entry", len(d.B))
			}
		})
	}
}

// TestEncodingSequence: entries written back to back, as a commit writes
// them, decode in order; decoded byte slices alias the record but an apply
// copies them.
func TestEncodingSequence(t *testing.T) {
	cases := encodingCases()
	var rec []byte
	for _, c := range cases {
		rec = append(rec, c.enc...)
	}
	d := newDecoder(rec)
	for i := 0; d.More(); i++ {
		if i >= len(cases) {
			t.Fatal("more entries than written")
		}
		got, err := d.next()
		if err != nil {
			t.Fatalf("entry %d (%s): %v", i, cases[i].name, err)
		}
		if !entriesEqual(got, cases[i].want) {
			t.Fatalf("entry %d (%s): decoded %+v", i, cases[i].name, got)
		}
	}
	if d.Err != nil {
		t.Fatal(d.Err)
	}

	// The model keeps no reference to the record.
	grant := appendChange(nil, &locker.Change{Kind: locker.ChangeGrant, Key: []byte("k"), Token: 5, Owner: []byte("owner")}, 100)
	m := newModel(0)
	d = newDecoder(grant)
	e, err := d.next()
	if err != nil {
		t.Fatal(err)
	}
	m.apply(&e)
	for i := range grant {
		grant[i] = 0xff
	}
	if l := m.locks["k"]; l == nil || len(l.leases) != 1 || string(l.leases[0].owner) != "owner" {
		t.Fatalf("model aliases the record: %+v", l)
	}
}

func TestDecodeTruncated(t *testing.T) {
	for _, c := range encodingCases() {
		if len(c.enc) > 2000 {
			// Every cut of a long key is alike; keep the quadratic walk short.
			c.enc = c.enc[:1000]
			d := newDecoder(c.enc)
			if _, err := d.next(); !errors.Is(err, errShort) {
				t.Errorf("%s cut to 1000 bytes: err %v, want errShort", c.name, err)
			}
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			for n := 1; n < len(c.enc); n++ {
				d := newDecoder(bytes.Clone(c.enc[:n]))
				if _, err := d.next(); !errors.Is(err, errShort) {
					t.Fatalf("cut to %d of %d bytes: err %v, want errShort", n, len(c.enc), err)
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"kind 0", []byte{0, 0}, "unknown entry kind 0"},
		{"kind 6", []byte{6, 0}, "unknown entry kind 6"},
		{"kind 15", []byte{15, 0}, "unknown entry kind 15"},
		{"kind 21", []byte{21, 0}, "unknown entry kind 21"},
		{"kind 255", []byte{255, 1, 'a'}, "unknown entry kind 255"},
		{"header from a newer format", func() []byte {
			b := []byte{kindHeader, 0, formatVersion + 1, 5}
			return b
		}(), fmt.Sprintf("format version %d", formatVersion+1)},
		{"header of version 0", []byte{kindHeader, 0, 0, 5}, "format version 0"},
		{"time mark cut short", appendTimeMark(nil, timeMark{bootID: "b", boottime: 1, wall: 2, stamp: 3})[:6], errShort.Error()},
		{"key longer than the record", []byte{kindDelete, 10, 'a'}, errShort.Error()},
		{"varint overflow", append([]byte{kindRelease, 0}, bytes.Repeat([]byte{0xff}, 11)...), errShort.Error()},
		{"lease count past the record", []byte{kindLock, 1, 'k', 0, 0, 0, 0, 0, 0, 200, 1}, errShort.Error()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newDecoder(c.b)
			_, err := d.next()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range encodingCases() {
		if len(c.enc) < 1000 {
			f.Add(c.enc)
		}
	}
	var all []byte
	for _, c := range encodingCases() {
		if len(c.enc) < 1000 {
			all = append(all, c.enc...)
		}
	}
	f.Add(all)
	f.Add([]byte{kindLock, 1, 'k', 1, 0, 0, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		m := newModel(0)
		d := newDecoder(b)
		for n := 0; d.More(); n++ {
			if n > len(b) {
				t.Fatal("decoder makes no progress")
			}
			before := len(d.B)
			e, err := d.next()
			if err != nil {
				break
			}
			if len(d.B) >= before {
				t.Fatal("an entry decoded from no bytes")
			}
			if e.kind == kindLock && len(e.lock.leases) > len(b) {
				t.Fatalf("%d leases from %d bytes", len(e.lock.leases), len(b))
			}
			m.apply(&e)
		}
		// Whatever decoded must convert without panicking.
		for key, l := range m.locks {
			l.lockState(key, func(w int64) int64 { return w }, 0, time.Second, time.Second)
		}
	})
}
