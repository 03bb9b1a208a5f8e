package locker

import "time"

// Mode is the kind of lease a Request asks for.
type Mode uint8

const (
	// Exclusive is a lease no one else holds at the same time: a lock's
	// only holder, or one permit of a semaphore. It is the zero Mode.
	Exclusive Mode = iota
	// Shared is a read lease: any number of readers may hold a lock at
	// once, each with its own token, but never together with an exclusive
	// holder. A reader does not overtake anyone queued, so a writer waiting
	// for the readers to leave is not starved by new ones. Semaphores have
	// no shared leases (ErrSharedSemaphore).
	Shared
)

// String returns "exclusive" or "shared".
func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// Request is what every way to acquire asks for: one lock (Key) through
// Acquire and AcquireWait, or several, all or none (Keys), through
// AcquireAll and AcquireAllWait. The table reads it during the call and
// keeps copies of what it needs, so its slices may alias a network buffer.
//
// The ephemeral tie of a lease to a connection is not here: the table knows
// nothing of connections, and the server keeps those ties.
type Request struct {
	Key  []byte   // the lock of Acquire and AcquireWait
	Keys [][]byte // the locks of AcquireAll and AcquireAllWait; distinct
	// TTL is each lease's ttl. 0 means the lock's default ttl (from
	// Create), for one key only: AcquireAll and AcquireAllWait require one.
	TTL time.Duration
	// Owner, when not empty, names the requester: a live lease already held
	// by Owner is renewed to TTL and its token returned again, so a retry
	// is safe, and a waiting request of Owner's takes the place of one
	// already queued rather than queueing twice.
	Owner []byte
	// NoRenew refuses the request when Owner already holds a live lease of
	// the lock, as when anyone else holds one, instead of renewing it: a
	// Redis client's SET key value NX, which fails on a key that exists
	// whatever its value.
	NoRenew bool
	Mode    Mode
	// Priority places a waiting request in each lock's queue: higher first,
	// then in order of arrival. Only AcquireWait and AcquireAllWait queue.
	Priority int
	// Wait is how long the caller waits at most. The table does not time a
	// wait out (the caller cancels it); AcquireAllWait holds the keys it
	// takes on the way for TTL+Wait, so that none runs out while it waits
	// for the rest.
	Wait time.Duration
}
