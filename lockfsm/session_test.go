package lockfsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"
	"time"
)

func TestTaggedEntryRoundTrip(t *testing.T) {
	cmds := []Command{
		{Op: OpAcquire, Key: []byte("k"), TTL: time.Second, Owner: []byte("o")},
		{Op: OpEndSession, Client: []byte("n1\x00conn9")},
	}
	for _, tag := range []Tag{{}, {Client: []byte("n1\x00conn7"), Seq: 0}, {Client: []byte("c"), Seq: 1<<64 - 1}} {
		gotTag, got, err := DecodeTaggedEntry(AppendTaggedEntry(nil, tag, cmds))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gotTag.Client, tag.Client) || gotTag.Seq != tag.Seq || !reflect.DeepEqual(got, cmds) {
			t.Errorf("tag %+v: got %+v %+v", tag, gotTag, got)
		}
	}
	if !bytes.Equal(AppendEntry(nil, cmds), AppendTaggedEntry(nil, Tag{Seq: 5}, cmds)) {
		t.Error("a tag with no client is not none")
	}
	// A tagged entry cut anywhere is refused.
	entry := AppendTaggedEntry(nil, Tag{Client: []byte("client"), Seq: 300}, cmds)
	for n := range len(entry) {
		if _, _, err := DecodeTaggedEntry(entry[:n]); err == nil {
			t.Errorf("the entry cut to %d of %d bytes decoded", n, len(entry))
		}
	}
}

// TestDecodeVersion1Entry: an entry written before tags (version 1: the
// version, then the commands) still decodes, with no tag.
func TestDecodeVersion1Entry(t *testing.T) {
	want := sampleCommands()
	v2 := AppendEntry(nil, want)
	if v2[0] != entryVersion || v2[1] != 0 {
		t.Fatalf("an untagged entry begins %x", v2[:2])
	}
	v1 := append([]byte{entryVersionV1}, v2[2:]...)
	tag, got, err := DecodeTaggedEntry(v1)
	if err != nil || tag.Client != nil || len(got) != len(want) {
		t.Fatalf("version 1 entry: %+v, %d commands, %v", tag, len(got), err)
	}
	again, _ := DecodeEntry(v2)
	if !reflect.DeepEqual(got, again) {
		t.Fatal("a version 1 entry decodes to other commands than the same batch at version 2")
	}
}

// TestTaggedEntryAppliesOnce: a retry of a client's last batch answers
// with the results it first had and changes nothing (the next grant's
// token is the one it would have been); an older batch is refused with
// ErrStaleRequest and applies nothing; other clients' sessions are their
// own; OpEndSession forgets one.
func TestTaggedEntryAppliesOnce(t *testing.T) {
	r := newReplica(t, 4)
	c1, c2 := Tag{Client: []byte("n1/c1"), Seq: 1}, Tag{Client: []byte("n1/c2"), Seq: 1}
	acquire := func(key string) Command {
		return Command{Op: OpAcquire, Key: []byte(key), TTL: time.Second}
	}
	tooLong := Command{Op: OpAcquire, Key: []byte("a"), TTL: 48 * time.Hour}
	first := r.applyTagged(t, c1, acquire("a"), acquire("a"), tooLong)
	if !first[0].Granted || first[1].Granted || first[2].Err == nil {
		t.Fatalf("first batch: %+v", first)
	}
	before := r.fsm.Table().Stats()
	retry := r.applyTagged(t, c1, acquire("a"), acquire("a"), tooLong)
	if !reflect.DeepEqual(retry, first) {
		t.Fatalf("the retry answered %+v, want %+v", retry, first)
	}
	// Nothing was applied: no grant, and the next token is the one that
	// followed the first batch.
	if after := r.fsm.Table().Stats(); after != before {
		t.Fatalf("the retry changed the table: %+v, then %+v", before, after)
	}
	r.apply(t, Command{Op: OpRelease, Key: []byte("a"), Token: first[0].Token})
	if next := r.apply(t, acquire("a")); next[0].Token != first[0].Token+1 {
		t.Fatalf("after the retry the next token is %d, want %d", next[0].Token, first[0].Token+1)
	}
	c1.Seq = 2
	r.applyTagged(t, c1, Command{Op: OpAcquire, Key: []byte("a"), TTL: time.Second, Owner: []byte("o")})
	first[0].Token++
	c1.Seq = 3

	second := r.applyTagged(t, c1, Command{Op: OpRelease, Key: []byte("a"), Token: first[0].Token})
	if !second[0].Granted {
		t.Fatalf("release: %+v", second)
	}
	c1.Seq = 1
	stale := r.applyTagged(t, c1, acquire("a"), acquire("c"))
	for _, res := range stale {
		if res.Err != ErrStaleRequest {
			t.Fatalf("the stale batch answered %+v", stale)
		}
	}
	if _, ok := r.fsm.Table().Status([]byte("c")); ok {
		t.Fatal("the stale batch was applied")
	}
	// Another client's Seq 1 is its own.
	if res := r.applyTagged(t, c2, acquire("c")); !res[0].Granted {
		t.Fatalf("another client's first batch: %+v", res)
	}

	if res := r.apply(t, Command{Op: OpEndSession, Client: c1.Client}); res[0].N != 1 {
		t.Fatalf("END-SESSION of a known client: %+v", res)
	}
	if res := r.apply(t, Command{Op: OpEndSession, Client: c1.Client}); res[0].N != 0 {
		t.Fatalf("END-SESSION of a forgotten client: %+v", res)
	}
	// Forgotten, its old Seq applies again.
	if res := r.applyTagged(t, c1, acquire("d")); !res[0].Granted || res[0].Err != nil {
		t.Fatalf("after END-SESSION: %+v", res)
	}
	if r.fsm.sessions.len() != 2 {
		t.Fatalf("%d sessions, want 2", r.fsm.sessions.len())
	}
}

// TestSessionEviction: past the bound, the session used least recently by
// log index goes first, a retry counting as a use; an evicted client's
// retry is applied again.
func TestSessionEviction(t *testing.T) {
	r := newReplica(t, 4)
	r.fsm.sessions.max = 3
	tag := func(c string, seq uint64) Tag { return Tag{Client: []byte(c), Seq: seq} }
	noop := Command{Op: OpEndSession, Client: []byte("nobody")}
	for _, c := range []string{"c1", "c2", "c3"} {
		r.applyTagged(t, tag(c, 1), noop)
	}
	r.applyTagged(t, tag("c1", 1), noop) // a retry: c1 is now the most recent
	r.applyTagged(t, tag("c4", 1), noop) // evicts c2
	r.applyTagged(t, tag("c3", 2), noop) // a new batch: c3 most recent
	r.applyTagged(t, tag("c5", 1), noop) // evicts c1
	var order []string
	r.fsm.sessions.each(func(client string, _ *session) { order = append(order, client) })
	if want := []string{"c4", "c3", "c5"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("sessions %v, want %v", order, want)
	}
	// c2 was forgotten: its retry creates a lock again.
	r.apply(t, Command{Op: OpCreate, Key: []byte("k")})
	res := r.applyTagged(t, tag("c2", 1), Command{Op: OpDelete, Key: []byte("k")})
	if !res[0].Granted {
		t.Fatalf("an evicted client's retry was not applied: %+v", res)
	}
}

// TestSnapshotKeepsSessions: a replica restored from a snapshot answers a
// retry as the original would, with the same sessions in the same order;
// a version 1 snapshot (no sessions) still restores.
func TestSnapshotKeepsSessions(t *testing.T) {
	r := newReplica(t, 4)
	r.fsm.sessions.max = 2
	tags := []Tag{{Client: []byte("a"), Seq: 3}, {Client: []byte("b"), Seq: 1}}
	var want [][]Result
	for _, tag := range tags {
		want = append(want, r.applyTagged(t, tag,
			Command{Op: OpAcquire, Key: []byte("k"), TTL: time.Second},
			Command{Op: OpAcquire, Key: []byte("k"), TTL: 48 * time.Hour},
			Command{Op: OpDelete, Key: []byte("k")}))
	}
	snap := snapshotBytes(t, r)

	restored := newReplica(t, 16)
	restored.fsm.sessions.max = 2
	restore(t, restored, snap)
	restored.index = r.index
	if !bytes.Equal(dump(t, restored), dump(t, r)) {
		t.Fatalf("restored:\n%s\nwant:\n%s", dump(t, restored), dump(t, r))
	}
	for i, tag := range tags {
		for _, rep := range []*replica{r, restored} {
			got := rep.applyTagged(t, tag, Command{Op: OpAcquire, Key: []byte("k"), TTL: time.Second})
			if !bytes.Equal(AppendResults(nil, got), AppendResults(nil, want[i])) {
				t.Fatalf("a retry of %+v answered %+v, want %+v", tag, got, want[i])
			}
		}
	}
	// The order of use came through: one more client evicts the same one.
	for _, rep := range []*replica{r, restored} {
		rep.applyTagged(t, Tag{Client: []byte("c"), Seq: 1})
	}
	if !bytes.Equal(dump(t, restored), dump(t, r)) {
		t.Fatalf("after an eviction, restored:\n%s\nwant:\n%s", dump(t, restored), dump(t, r))
	}

	// Version 1: the same without the sessions' section.
	noSessions := newReplica(t, 4)
	noSessions.apply(t, Command{Op: OpAcquire, Key: []byte("k"), TTL: time.Second})
	v2 := snapshotBytes(t, noSessions)
	// No sessions, no waits (their count, none queued on no lock), no
	// grants.
	if tail := v2[len(v2)-4:]; !bytes.Equal(tail, []byte{0, 0, 0, 0}) {
		t.Fatalf("a snapshot with no sessions and no waits ends with %x", tail)
	}
	v1 := append(append([]byte(nil), snapshotMagicV1...), v2[len(snapshotMagic):len(v2)-4]...)
	old := newReplica(t, 2)
	restore(t, old, v1)
	if !bytes.Equal(dump(t, old), dump(t, noSessions)) {
		t.Fatalf("from version 1:\n%s\nwant:\n%s", dump(t, old), dump(t, noSessions))
	}
}

func snapshotBytes(t *testing.T, r *replica) []byte {
	t.Helper()
	snap, err := r.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

func restore(t *testing.T, r *replica, b []byte) {
	t.Helper()
	if err := r.fsm.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
}
