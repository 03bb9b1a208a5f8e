package lockfsm

import (
	"fmt"

	"github.com/leasehold/leasehold/locker"
)

// Every replica applies entries with its own locker.Config, so the settings
// that decide what an entry does must be the same on each, or the replicas
// drift apart without a sound (a lock-delay on one and not another, a grant
// one refuses as too long). Each leader proposes its own (OpSettings) when
// its term begins, after OpTerm; a replica whose own differ remembers the
// leader's (SettingsMismatch) for the server to refuse clients and say so.

// settingsOf is the canonical text of the settings in cfg that change what
// an entry does. Shards and Tick do not: they change no answer.
func settingsOf(cfg locker.Config) string {
	return fmt.Sprintf("max-ttl=%s,max-key-len=%d,lock-delay=%s,require-create=%t,max-locks=%d",
		cfg.MaxTTL, cfg.MaxKeyLen, cfg.LockDelay, cfg.RequireCreate, cfg.MaxLocks)
}

// Settings is this replica's lock-table settings, as OpSettings carries them.
func (f *FSM) Settings() string { return f.settings }

// SettingsMismatch returns the settings of the leader whose OpSettings was
// applied last, if they are not this replica's, and "" if they are (or none
// was applied yet).
func (f *FSM) SettingsMismatch() string {
	if p := f.mismatch.Load(); p != nil {
		return *p
	}
	return ""
}

// OnSettingsMismatch has fn called when an OpSettings applied names a
// leader's settings that differ from this replica's, once per leader
// settings seen: on the applying goroutine, so it must not block.
func OnSettingsMismatch(fn func(own, leader string)) Option {
	return func(f *FSM) { f.onMismatch = fn }
}
