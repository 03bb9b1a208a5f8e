package lockfsm

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// TestSettingsMismatch: a replica told of a leader's settings unlike its
// own says so (and its hook hears it once), until a leader with its own
// settings tells it again. Nothing replicated changes.
func TestSettingsMismatch(t *testing.T) {
	r := newReplica(t, 4)
	var heard []string
	r.fsm.onMismatch = func(own, leader string) { heard = append(heard, leader) }
	other := locker.DefaultConfig()
	other.MaxTTL, other.LockDelay = time.Hour, time.Second
	theirs := settingsOf(other)
	if r.fsm.Settings() == theirs {
		t.Fatal("different configs, the same settings")
	}
	if !strings.Contains(theirs, "max-ttl=1h0m0s") || !strings.Contains(theirs, "lock-delay=1s") {
		t.Fatalf("settings %q lack the values", theirs)
	}
	if got := r.fsm.SettingsMismatch(); got != "" {
		t.Fatalf("before any OpSettings: mismatch %q", got)
	}
	before := dump(t, r)
	for range 2 {
		if res := r.apply(t, Command{Op: OpSettings, Settings: []byte(theirs)}); res[0].N != 0 {
			t.Fatalf("another's settings answered %+v", res)
		}
	}
	if got := r.fsm.SettingsMismatch(); got != theirs {
		t.Fatalf("mismatch %q, want the leader's %q", got, theirs)
	}
	if len(heard) != 1 || heard[0] != theirs {
		t.Fatalf("the hook heard %q, want the leader's settings once", heard)
	}
	if res := r.apply(t, Command{Op: OpSettings, Settings: []byte(r.fsm.Settings())}); res[0].N != 1 {
		t.Fatalf("its own settings answered %+v", res)
	}
	if got := r.fsm.SettingsMismatch(); got != "" {
		t.Fatalf("after a leader with the same settings: mismatch %q", got)
	}
	if after := dump(t, r); string(after) != string(before) {
		t.Fatalf("OpSettings changed the table:\n%s\nthen\n%s", before, after)
	}
}
