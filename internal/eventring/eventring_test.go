package eventring

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/locker"
)

// TestRing: nothing is kept while no one records; the last Max events are,
// oldest first, once it wraps round; long keys are cut; a recorder's stop
// ends the recording and is safe twice.
func TestRing(t *testing.T) {
	var r Ring
	sink := Sink{Ring: &r, Next: idle{}}
	sink.Publish(locker.Event{Kind: locker.EventAcquired, Key: "before"})
	if got := r.Read(); len(got) != 0 || sink.Active() {
		t.Fatalf("not recording: kept %v, active %v", got, sink.Active())
	}
	stop := r.Record()
	if !sink.Active() {
		t.Fatal("recording, and the sink is not active")
	}
	for i := range 2*Max + 7 {
		sink.Publish(locker.Event{Kind: locker.EventAcquired, Key: fmt.Sprint(i), Token: uint64(i)})
	}
	long := strings.Repeat("k", TextMax+1)
	sink.Publish(locker.Event{Kind: locker.EventReleased, Key: long, Owner: "o"})
	stop()
	stop()
	got := r.Read()
	if len(got) != Max {
		t.Fatalf("%d events kept, want %d", len(got), Max)
	}
	for i, ev := range got[:Max-1] {
		if want := uint64(2*Max + 7 - (Max - 1) + i); ev.Token != want || ev.Key != fmt.Sprint(want) {
			t.Fatalf("event %d: %+v, want token %d", i, ev, want)
		}
	}
	if last := got[Max-1]; last.Key != long[:TextMax] || !last.Truncated || last.Owner != "o" || last.Time.IsZero() {
		t.Fatalf("last event %+v, want the long key cut", last)
	}
	if r.On() {
		t.Fatal("still recording after stop")
	}
}

// idle is a sink with no listener.
type idle struct{}

func (idle) Active() bool         { return false }
func (idle) Publish(locker.Event) { panic("published to an idle sink") }
