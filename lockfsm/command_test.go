package lockfsm

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// sampleCommands has every op, with the fields each one carries, and the
// edge values: an empty scope (not nil), no owner, large numbers.
func sampleCommands() []Command {
	return []Command{
		{Op: OpTerm, Term: 7, Floor: 1 << 52},
		{Op: OpCreate, Key: []byte("jobs"), Options: locker.CreateOptions{DefaultTTL: time.Second, LockDelay: 15 * time.Second, LockDelaySet: true, Limit: 3}},
		{Op: OpCreate, Key: []byte("plain")},
		{Op: OpAcquire, Key: []byte("jobs"), TTL: 30 * time.Second, Owner: []byte("alice\x00w1"), Shared: true},
		{Op: OpAcquire, Key: []byte("k"), TTL: time.Millisecond},
		{Op: OpAcquireAll, Keys: [][]byte{[]byte("a"), []byte("b"), []byte("")}, TTL: time.Minute, Owner: []byte("o")},
		{Op: OpRelease, Key: []byte("jobs"), Token: 1<<53 - 1, Scope: []byte("alice\x00")},
		{Op: OpRelease, Key: []byte("jobs"), Token: 1},
		{Op: OpRelease, Key: []byte("jobs"), Token: 1, Scope: []byte{}},
		{Op: OpExtend, Key: []byte("jobs"), Token: 9, TTL: 24 * time.Hour},
		{Op: OpDelete, Key: []byte("jobs")},
		{Op: OpForceRelease, Key: []byte("jobs"), Token: locker.AllLeases},
		{Op: OpFire, Term: 7, Due: []locker.Due{{Kind: locker.DueLease, Key: "jobs", Token: 5, Renewals: 3}, {Kind: locker.DueDelay, Key: "x", Token: 6}}},
		{Op: OpFire, Term: 8},
		{Op: OpEndSession, Client: []byte("n2\x00conn3")},
		{Op: OpWait, Key: []byte("jobs"), TTL: time.Second, Owner: []byte("o"), Shared: true, Priority: -7, Waiter: []byte("n1/c2/99"), Wait: time.Minute},
		{Op: OpWait, Key: []byte("k"), TTL: time.Second, Priority: 1 << 31, Waiter: []byte("w"), Wait: 1},
		{Op: OpCancelWait, Waiter: []byte("n1/c2/99")},
		{Op: OpSettings, Settings: []byte("max-ttl=24h0m0s")},
		{Op: OpAcquireNew, Key: []byte("legacy:job"), TTL: 10 * time.Second, Owner: []byte("f3a9")},
		{Op: OpAcquireAllNew, Keys: [][]byte{[]byte("a"), []byte("b")}, TTL: time.Second, Owner: []byte("o")},
		{Op: OpReleaseOwned, Key: []byte("legacy:job"), Owner: []byte("f3a9"), Scope: []byte("alice\x00")},
		{Op: OpReleaseOwned, Key: []byte("legacy:job")},
		{Op: OpExtendOwned, Key: []byte("legacy:job"), Owner: []byte("f3a9"), TTL: 3 * time.Second, AddTTL: true},
		{Op: OpExtendOwned, Key: []byte("legacy:job"), Scope: []byte{}, TTL: time.Second},
		{Op: OpOwnedTTL, Key: []byte("legacy:job"), Owner: []byte("f3a9")},
		{Op: OpExtendAllOwned, Keys: [][]byte{[]byte("a"), []byte("b")}, Owner: []byte("f3a9"), TTL: time.Minute},
	}
}

func TestEntryRoundTrip(t *testing.T) {
	want := sampleCommands()
	entry := AppendEntry(nil, want)
	got, err := DecodeEntry(entry)
	if err != nil {
		t.Fatal(err)
	}
	// Decoding makes empty lists and keys of what was nil or empty alike;
	// compare what the commands mean.
	for i := range want {
		if want[i].Op == OpAcquireAll && len(got[i].Keys) == 3 && len(got[i].Keys[2]) == 0 {
			got[i].Keys[2] = want[i].Keys[2]
		}
		if want[i].Op == OpFire && len(want[i].Due) == 0 && len(got[i].Due) == 0 {
			got[i].Due = want[i].Due
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("command %d: got %#v, want %#v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d commands, want %d", len(got), len(want))
	}
	if got[8].Scope == nil || got[7].Scope != nil {
		t.Error("an empty scope and no scope must stay apart")
	}
}

// TestDecodeEntryRefusesDamage: every truncation of a good entry, and the
// entry with a byte changed at each place, decodes to an error or to
// commands, never a panic; truncations are always errors.
func TestDecodeEntryRefusesDamage(t *testing.T) {
	entry := AppendEntry(nil, sampleCommands())
	for n := range len(entry) {
		if _, err := DecodeEntry(entry[:n]); err == nil {
			t.Errorf("the entry cut to %d of %d bytes decoded", n, len(entry))
		}
	}
	for i := range entry {
		damaged := append([]byte(nil), entry...)
		damaged[i] ^= 0xff
		DecodeEntry(damaged)
	}
	if _, err := DecodeEntry(append(entry, 0)); err == nil {
		t.Error("an entry with a byte after its last command decoded")
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(AppendEntry(nil, sampleCommands()))
	f.Add(AppendTaggedEntry(nil, Tag{Client: []byte("n1\x00c7"), Seq: 42}, sampleCommands()))
	f.Add([]byte{entryVersion, 1, byte(OpAcquireAll), 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		tag, cmds, err := DecodeTaggedEntry(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same meaning.
		againTag, again, err := DecodeTaggedEntry(AppendTaggedEntry(nil, tag, cmds))
		if err != nil || len(again) != len(cmds) || !bytes.Equal(againTag.Client, tag.Client) || againTag.Seq != tag.Seq {
			t.Fatalf("re-encoding %d decoded commands: %d, %v", len(cmds), len(again), err)
		}
	})
}
