package locker

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Table is the lock table. All methods are safe for concurrent use.
//
// Keys and owners are passed as byte slices that the table copies and never
// retains, so a caller may hand it a network buffer.
type Table struct {
	cfg       Config
	seed      maphash.Seed
	shards    []*shard
	shardBits int
	tick      int64

	prefetching atomic.Bool // PrefetchWorthwhile's answer, refreshed by ExpireDue
	bound       *lockBound  // Config.MaxLocks; nil for none
	tokens      *slotTokens // replicated mode's token counters; nil in the default mode

	collectMu   sync.Mutex // serialises CollectDue; guards collectFrom
	collectFrom int        // the shard CollectDue starts at

	mu      sync.Mutex // guards started, closed
	started bool
	closed  bool
	stopC   chan struct{}
	doneC   chan struct{}
}

// New returns an empty table. It starts no goroutine; call Start for the
// reaper that reclaims expired leases, or ExpireDue to drive it by hand.
func New(cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.PrefetchFrom == 0 {
		cfg.PrefetchFrom = DefaultPrefetchFrom
	}
	t := &Table{
		cfg:       cfg,
		seed:      maphash.MakeSeed(),
		shards:    make([]*shard, cfg.Shards),
		shardBits: bits.Len(uint(cfg.Shards)) - 1,
		tick:      int64(cfg.Tick),
		stopC:     make(chan struct{}),
		doneC:     make(chan struct{}),
	}
	if cfg.MaxLocks > 0 {
		t.bound = newLockBound(cfg.MaxLocks)
	}
	now := int64(cfg.Clock.Now())
	var budget *tokenBudget
	if cfg.Journal != nil {
		budget = &tokenBudget{journal: cfg.Journal}
	}
	if cfg.Replicated {
		t.tokens = &slotTokens{}
		t.tokens.floor.Store(cfg.FirstToken)
	}
	for i := range t.shards {
		s := newShard(t.seed, cfg.FirstToken, now, t.tick, int64(cfg.LockDelay), cfg.Events)
		s.num, s.journalTo, s.budget = i, cfg.Journal, budget
		s.bound = t.bound
		if cfg.Replicated {
			s.replicated, s.tokens = true, t.tokens
			s.renewals = make(map[uint32]uint32)
		}
		t.shards[i] = s
	}
	return t, nil
}

// Config returns the table's settings.
func (t *Table) Config() Config { return t.cfg }

// Start launches the reaper goroutine, which the table owns: it calls
// ExpireDue every Tick until Close. In replicated mode the reaper only
// keeps house (gives memory back); it ends nothing.
func (t *Table) Start() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if t.started {
		return nil
	}
	t.started = true
	go t.reap()
	return nil
}

func (t *Table) reap() {
	defer close(t.doneC)
	ticker := time.NewTicker(t.cfg.Tick)
	defer ticker.Stop()
	for {
		select {
		case <-t.stopC:
			return
		case <-ticker.C:
			t.ExpireDue()
		}
	}
}

// Close stops the reaper and waits for it to return. It is safe to call more
// than once. The table still answers calls afterwards, expiring lazily.
func (t *Table) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	started := t.started
	close(t.stopC)
	t.mu.Unlock()
	if started {
		<-t.doneC
	}
	return nil
}

// ExpireDue reclaims every lease whose deadline has passed by the wheel's
// resolution and returns how many it expired. The reaper calls it each tick.
// In replicated mode it expires nothing and returns 0: it only keeps house,
// and the wheel is CollectDue's.
func (t *Table) ExpireDue() int {
	if t.cfg.Replicated {
		for _, s := range t.shards {
			s.mu.Lock()
			s.tidy()
			t.unlock(s)
		}
		t.updatePrefetching()
		return 0
	}
	n := 0
	for _, s := range t.shards {
		upTo := int64(t.cfg.Clock.Now())
		for done := false; ; {
			var expired int
			s.mu.Lock()
			expired, done = s.expireDue(upTo, max(upTo, int64(t.cfg.Clock.Now())))
			if done {
				s.tidy()
			}
			t.unlock(s)
			n += expired
			if done {
				break
			}
			// Let a command waiting for the lock have it before the next
			// batch: sync.Mutex lets the unlocker take it straight back.
			runtime.Gosched()
		}
	}
	t.updatePrefetching()
	return n
}

// locate hashes key once: the top bits pick its shard, the low 32 bits are
// its hash within the shard's index.
func (t *Table) locate(key []byte) (uint32, *shard) {
	h, si := t.place(key)
	return h, t.shards[si]
}

// place is locate with the shard's index, the order in which AcquireAll
// locks shards.
func (t *Table) place(key []byte) (uint32, int) {
	h := maphash.Bytes(t.seed, key)
	return uint32(h), int(h >> (64 - t.shardBits) & uint64(len(t.shards)-1))
}

// CheckKey returns the error any operation would give for key's length:
// ErrEmptyKey, ErrKeyTooLong, or nil.
func (t *Table) CheckKey(key []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > t.cfg.MaxKeyLen:
		return ErrKeyTooLong
	}
	return nil
}

func (t *Table) checkLockDelay(d time.Duration) error {
	if d < 0 || d > t.cfg.MaxTTL {
		return fmt.Errorf("%w: must be between 0 and %d ms", ErrLockDelayRange, t.cfg.MaxTTL.Milliseconds())
	}
	return nil
}

func (t *Table) checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > t.cfg.MaxTTL {
		return fmt.Errorf("%w: must be between 1 and %d ms", ErrTTLRange, t.cfg.MaxTTL.Milliseconds())
	}
	return nil
}

// CreateOptions are a lock's own settings.
type CreateOptions struct {
	// DefaultTTL is the lease ttl of a single-key request that names none
	// (Request.TTL 0); 0 for none.
	DefaultTTL time.Duration
	// LockDelay, when LockDelaySet, replaces Config.LockDelay for this lock.
	LockDelay    time.Duration
	LockDelaySet bool
	// Limit, when positive, makes the lock a semaphore: up to Limit leases
	// (permits) at once, each with its own token, queued as a lock is.
	Limit int
}

// MaxLimit bounds a semaphore's permits. Its holders are kept in a list
// that expiry and release walk, so the bound keeps those walks short.
const MaxLimit = 1 << 16

// Create makes a lock with its own settings and reports whether it was
// made. A lock that exists only because Acquire made it on the fly is
// adopted: it becomes a created lock with these settings, and Create reports
// true. A created lock stays when free, until Delete.
func (t *Table) Create(key []byte, opts CreateOptions) (bool, error) {
	if err := t.CheckKey(key); err != nil {
		return false, err
	}
	if opts.DefaultTTL != 0 {
		if err := t.checkTTL(opts.DefaultTTL); err != nil {
			return false, err
		}
	}
	if opts.Limit < 0 || opts.Limit > MaxLimit {
		return false, fmt.Errorf("%w: must be between 1 and %d", ErrLimitRange, MaxLimit)
	}
	if opts.LockDelaySet {
		if err := t.checkLockDelay(opts.LockDelay); err != nil {
			return false, err
		}
	}
	st := settingsOf(opts)
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	switch {
	case i == 0:
		if err := s.claim(1); err != nil {
			return false, err
		}
		i = s.insert(h, key)
	case s.at(i).flags&flagCreated != 0:
		return false, nil
	case st.limit > 0 && s.at(i).flags&(flagHeld|flagDelayed|flagMulti) != 0:
		// Its leases would have to become permits mid-flight.
		return false, &KeyError{Key: string(key), Err: ErrInUse}
	}
	s.makeCreated(i, st)
	// The create's time: a replay needs it to tell which of the leases it
	// knows of had expired by then (expiry is not journaled).
	s.journal(ChangeCreate, i, 0, now, nil, false)
	return true, nil
}

// Acquire grants req.Key's lease now or not at all, and returns its fencing
// token; granted=false when a live lease held by someone else is in the way,
// or someone is queued for the lock (Acquire never overtakes a waiting
// request). req.Mode picks an exclusive or a shared lease; on a semaphore,
// an exclusive Acquire takes one of its permits. An unknown key is created
// on the fly (and removed again once free) unless Config.RequireCreate is
// set. See Request for the ttl and the owner's retry.
func (t *Table) Acquire(req *Request) (token uint64, granted bool, err error) {
	return t.acquire(req, nil)
}

// acquire grants req's lease if it can, and otherwise queues w (when not
// nil) for it: Acquire and AcquireWait in one.
func (t *Table) acquire(req *Request, w *Wait) (token uint64, granted bool, err error) {
	if err := t.CheckKey(req.Key); err != nil {
		return 0, false, err
	}
	if len(req.Owner) > t.cfg.MaxKeyLen {
		return 0, false, ErrOwnerTooLong
	}
	if req.TTL != 0 {
		if err := t.checkTTL(req.TTL); err != nil {
			return 0, false, err
		}
	}
	return t.take(req.Key, req.TTL, req.Owner, req.Mode, !req.NoRenew, w)
}

// take is acquire without checking its arguments, for AcquireAllWait's
// leases that are held longer than max-ttl while the rest are waited for.
// The caller has set w's ttl, mode and priority; take copies the owner.
// With renew, a live lease of owner's is renewed (see Request.Owner);
// without, it is in the way as anyone's (Request.NoRenew).
func (t *Table) take(key []byte, ttl time.Duration, owner []byte, mode Mode, renew bool, w *Wait) (token uint64, granted bool, err error) {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 {
		if t.cfg.RequireCreate {
			return 0, false, &KeyError{Key: string(key), Err: ErrNoSuchLock}
		}
		if ttl == 0 {
			return 0, false, ErrNoTTL
		}
		if err := s.claim(1); err != nil {
			return 0, false, err
		}
		i = s.insert(h, key)
	}
	if ttl == 0 {
		if ttl = time.Duration(s.defaultTTL(i)); ttl == 0 {
			return 0, false, ErrNoTTL
		}
	}
	e := s.at(i)
	if mode == Shared && e.flags&flagSemaphore != 0 {
		return 0, false, &KeyError{Key: string(key), Err: ErrSharedSemaphore}
	}
	if len(owner) > 0 && renew {
		// A retry: the owner's lease is renewed and its token returned again.
		switch n, err := s.ownersLease(i, owner, mode); {
		case err != nil:
			return 0, false, err
		case n != noLease:
			return s.renewLease(i, n, now, int64(ttl)), true, nil
		}
	}
	switch {
	case s.waiterCount(i) == 0 && s.grantable(i, mode):
		// Nobody queued ahead, and no holder in the way.
		return s.grantMode(i, now, int64(ttl), owner, mode), true, nil
	case w == nil:
		if s.waiterCount(i) == 0 && s.delayInTheWay(i, mode) {
			bump(&s.metrics.delayRefusals, 1)
		}
		return 0, false, nil
	}
	w.owner = append([]byte(nil), owner...) // owner may alias a network buffer
	w.since = stamp(now)
	if len(w.owner) == 0 || !s.takeOwnersPlace(i, w) {
		s.enqueue(i, w)
	}
	// A request queued by its priority ahead of one that cannot be granted
	// (a reader ahead of a writer, say) may be grantable itself: granted on
	// arrival, which is no hand-off.
	s.grantQueue(i, now, w)
	if w.state == waitGranted {
		s.keepGrant(w) // granted here and now: no Notify
		return w.token, true, nil
	}
	return 0, false, nil
}

// ownersLease finds owner's live lease of entry i: the entry's own
// (entryLease), the n-th of its holder set (n >= 0), or none (noLease). A
// lease of the other mode than asked for is ErrOwnerMode: a retry names the
// same mode.
func (s *shard) ownersLease(i uint32, owner []byte, mode Mode) (int, error) {
	e := s.at(i)
	n := noLease
	if e.flags&flagHeld != 0 && s.ownerIs(e, owner) {
		n = entryLease
	} else if n = s.ownersHolder(i, owner); n < 0 {
		return noLease, nil
	}
	if isShared := n >= 0 && e.flags&flagSemaphore == 0; isShared != (mode == Shared) {
		return noLease, &KeyError{Key: string(s.key(e)), Err: ErrOwnerMode}
	}
	return n, nil
}

const (
	entryLease = -1
	noLease    = -2
)

// renewLease moves the deadline of the lease ownersLease found, and returns
// its token.
func (s *shard) renewLease(i uint32, n int, now, ttl int64) uint64 {
	if n == entryLease {
		s.renew(i, now, ttl)
		return s.at(i).token
	}
	s.renewHolder(i, n, now, ttl)
	return s.holders(i).items[n].token
}

// Verify reports whether token is a live lease of key.
func (t *Table) Verify(key []byte, token uint64) bool {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	return s.heldBy(i, token) || i != 0 && s.liveHolder(i, token) >= 0
}

// Release ends the lease of key if token holds it and reports whether it did.
// A stale token never releases a newer holder.
func (t *Table) Release(key []byte, token uint64) bool {
	return t.ReleaseScoped(key, token, nil)
}

// ReleaseScoped is Release of a lease in scope only: one whose owner begins
// with scope (see Request.Owner). A nil scope takes in every lease. The
// server gives each user's owner ids a prefix of the user's own, so that a
// token, which anyone may guess (tokens count up), ends only a lease of the
// user's; the table knows nothing of users, only of prefixes.
func (t *Table) ReleaseScoped(key []byte, token uint64, scope []byte) bool {
	return t.release(key, token, scope, false)
}

// release is ReleaseScoped, and GiveBack when unrenewed: then a lease
// renewed since its grant is left alone.
func (t *Table) release(key []byte, token uint64, scope []byte, unrenewed bool) bool {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	switch {
	case s.heldBy(i, token) && s.inScope(s.at(i), scope):
		if unrenewed && s.at(i).flags&flagRenewed != 0 {
			return false
		}
		s.counts.released.Add(1)
		s.journal(ChangeRelease, i, token, 0, nil, false)
		s.emitEnd(EventReleased, i, now)
		s.endLease(i, now) // released, not expired: no lock-delay
	case i == 0:
		return false
	default:
		n := s.liveHolder(i, token)
		if n < 0 || !holderInScope(s.holders(i).items[n].owner, scope) {
			return false
		}
		if unrenewed && s.holders(i).items[n].renewals != 0 {
			return false
		}
		s.releaseHolder(i, n, now)
	}
	s.handOff(i, now)
	s.removeIfUnused(i)
	return true
}

// GiveBack releases the lease (key, token) that a queue granted to a waiter
// who cannot be told of it (its connection closed as the lock was handed
// over), unless the lease was renewed since its grant: then its owner's
// later request was answered with it (an ACQUIRE with the same OWNER
// renews the owner's live lease and returns its token), or an EXTEND named
// it, and it is that caller's now, not the departed waiter's. It reports
// whether it released the lease.
func (t *Table) GiveBack(key []byte, token uint64) bool {
	return t.release(key, token, nil, true)
}

// AllLeases, as ForceRelease's token, ends every lease of the lock. No lease
// has token 0.
const AllLeases uint64 = 0

// ForceRelease is the operator's override: it ends key's lease token
// whoever holds it, or with AllLeases every lease of the lock (an exclusive
// lease, the readers of a SHARED lock, a semaphore's permits). An expired
// lease serving a lock-delay is ended too, so the delay stops at once: a
// lock-delay set too long (by mistake or malice) must not make a lock
// ungrantable with nothing to undo it. It returns how many it ended, those
// lock-delays included. No lock-delay follows, as after Release; waiters
// are then granted as after Release, with tokens above every earlier one.
func (t *Table) ForceRelease(key []byte, token uint64) int {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 {
		return 0
	}
	ended := 0
	e := s.at(i)
	if e.flags&(flagHeld|flagDelayed) != 0 && (token == AllLeases || e.token == token) {
		s.journal(ChangeRelease, i, e.token, 0, nil, false)
		if e.flags&flagHeld != 0 {
			s.emitEnd(EventForced, i, now)
			s.endLease(i, now)
		} else {
			s.emit(EventForced, i, 0)
			e.flags &^= flagDelayed
			s.wheel.cancel(i)
		}
		ended++
	}
	if s.holders(i) != nil {
		ended += s.forceHolders(i, token, now)
	}
	s.handOff(i, now)
	s.removeIfUnused(i)
	return ended
}

// Extend moves the deadline of key's lease to now+ttl if token holds it, and
// reports whether it did.
func (t *Table) Extend(key []byte, token uint64, ttl time.Duration) (bool, error) {
	return t.ExtendScoped(key, token, ttl, nil)
}

// ExtendScoped is Extend of a lease in scope only (see ReleaseScoped).
func (t *Table) ExtendScoped(key []byte, token uint64, ttl time.Duration, scope []byte) (bool, error) {
	if err := t.checkTTL(ttl); err != nil {
		return false, err
	}
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if s.heldBy(i, token) {
		if !s.inScope(s.at(i), scope) {
			return false, nil
		}
		s.renew(i, now, int64(ttl))
		return true, nil
	}
	if i == 0 {
		return false, nil
	}
	n := s.liveHolder(i, token)
	if n < 0 || !holderInScope(s.holders(i).items[n].owner, scope) {
		return false, nil
	}
	s.renewHolder(i, n, now, int64(ttl))
	return true, nil
}

// Status describes one lock.
type Status struct {
	Held       bool
	Delayed    bool          // in its lock-delay: no lease, but not grantable yet
	Token      uint64        // the exclusive lease's token; 0 when free or shared
	Owner      string        // the exclusive lease's owner, if it named one
	TTL        time.Duration // time left on the exclusive lease
	LastToken  uint64        // the last token granted for this lock
	DefaultTTL time.Duration // from Create; 0 for none
	Created    bool          // made by Create (stays when free) rather than on the fly
	LockDelay  time.Duration // how long the lock stays ungrantable after a lease expires
	DelayLeft  time.Duration // time until every lock-delay of the lock has ended
	Waiters    int           // requests queued by AcquireWait
	Limit      int           // a semaphore's permits; 0 for a lock
	Shared     bool          // held by readers (Mode Shared)
	// Holders is the oldest StatusHolders live leases, exclusive or not,
	// oldest first; Table.Holders pages through them all.
	Holders []Holder
	// HoldersTotal counts every live lease: more than len(Holders) when the
	// list is cut.
	HoldersTotal int
}

// StatusHolders is the most holders Status lists. Status runs under its
// shard's lock, which every other command on the shard waits for, and its
// list becomes one reply: a full semaphore (MaxLimit holders, owners up to
// MaxKeyLen bytes) made a reply of 72 MB with 1 KiB owners, built there. A
// hundred covers every lock but the large semaphores and read-mostly locks,
// for which Holders pages, and keeps the reply near 100 KB with owners of
// the default MaxKeyLen.
const StatusHolders = 100

// HolderPageBytes ends a page of Holders early once the owners it lists
// pass it: a page becomes one reply, and a count of holders alone would let
// a large MaxKeyLen make it tens of megabytes.
const HolderPageBytes = 1 << 20

// Holder is one live lease of a lock.
type Holder struct {
	Token  uint64
	Owner  string
	TTL    time.Duration
	Shared bool
}

// Status returns key's state, and false for an unknown key. It lists at
// most StatusHolders holders; HoldersTotal says how many there are.
func (t *Table) Status(key []byte) (Status, bool) {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 {
		return Status{}, false
	}
	e := s.at(i)
	st := Status{
		LastToken:  e.token,
		DefaultTTL: time.Duration(s.defaultTTL(i)),
		Created:    e.flags&flagCreated != 0,
		LockDelay:  time.Duration(s.lockDelay(i)),
		Waiters:    s.waiterCount(i),
		Limit:      s.limit(i),
	}
	if e.flags&flagDelayed != 0 {
		st.Delayed = true
		st.DelayLeft = timeLeft(e.deadline, now)
	}
	if e.flags&flagHeld != 0 {
		st.Held = true
		st.Token = e.token
		st.TTL = timeLeft(e.deadline, now)
		if e.ownerLen > 0 {
			st.Owner = string(s.strings.get(e.ownerRef, int(e.ownerLen)))
		}
		st.Holders = []Holder{{Token: st.Token, Owner: st.Owner, TTL: st.TTL}}
		st.HoldersTotal = 1
	}
	if hs := s.holders(i); hs != nil {
		shared := e.flags&flagSemaphore == 0
		for n := range hs.items {
			// Past the listed leases, the walk goes on only while there are
			// expired ones in their lock-delay to find the last end of: it
			// reads deadlines, and copies nothing.
			if len(st.Holders) == StatusHolders && hs.live == len(hs.items) {
				break
			}
			switch h := &hs.items[n]; {
			case h.delayed:
				st.DelayLeft = max(st.DelayLeft, timeLeft(h.deadline, now))
			case len(st.Holders) < StatusHolders:
				st.Holders = append(st.Holders, Holder{Token: h.token, Owner: h.owner, TTL: timeLeft(h.deadline, now), Shared: shared})
			}
		}
		st.HoldersTotal += hs.live
		st.Held = hs.live > 0
		st.Shared = st.Held && shared
		st.Delayed = !st.Held
	}
	return st, true
}

// timeLeft is the time from now to deadline, 0 once it has passed: in
// replicated mode a lease outlives its deadline until Fire ends it.
func timeLeft(deadline, now int64) time.Duration { return time.Duration(max(deadline-now, 0)) }

// Holders lists key's live leases SCAN-style, in token order, which is the
// order they were granted in. Start with cursor 0; each call returns the
// cursor to pass next, and 0 once the walk is complete. The cursor is the
// last token the call looked at, and a call lists the leases with a greater
// token, so it stays valid whatever comes and goes in between: a lease live
// for the whole walk is listed exactly once, one granted during it is listed
// too (its token is greater than any before it), and one that ends during
// it is listed or not. count bounds the work of one call, as LOCKS's COUNT
// does: it looks at most count holders (expired ones in their lock-delay,
// which are no leases, included), so it may list fewer than count with a
// cursor that is not 0; a page also ends once its owners pass a megabyte.
// Holders are appended to dst. An unknown key lists nothing and returns 0,
// as SSCAN of a missing key does.
func (t *Table) Holders(key []byte, cursor uint64, count int, dst []Holder) (next uint64, holders []Holder) {
	count = max(count, 1)
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 {
		return 0, dst
	}
	if e := s.at(i); e.flags&flagHeld != 0 {
		// An exclusive lease is the lock's only one (holders.go).
		if e.token > cursor {
			var owner string
			if e.ownerLen > 0 {
				owner = string(s.strings.get(e.ownerRef, int(e.ownerLen)))
			}
			dst = append(dst, Holder{Token: e.token, Owner: owner, TTL: timeLeft(e.deadline, now)})
		}
		return 0, dst
	}
	return s.holderPage(i, cursor, count, now, dst)
}

// holderPage appends the live leases of entry i's holder set whose tokens
// come after cursor, looking at no more than count items and stopping after
// the one whose owner takes the page past HolderPageBytes, and returns the
// cursor to go on from: the last token looked at, or 0 when none is left.
// The set is in token order, so the page starts where a binary search puts
// it, and the work is bounded by count whatever the set's size.
func (s *shard) holderPage(i uint32, cursor uint64, count int, now int64, dst []Holder) (next uint64, holders []Holder) {
	hs := s.holders(i)
	if hs == nil {
		return 0, dst
	}
	n, found := slices.BinarySearchFunc(hs.items, cursor, func(h holder, t uint64) int { return cmp.Compare(h.token, t) })
	if found {
		n++
	}
	end := min(len(hs.items), n+count)
	shared := s.at(i).flags&flagSemaphore == 0
	bytes := 0
	for k, h := range hs.items[n:end] {
		if h.delayed {
			continue
		}
		dst = append(dst, Holder{Token: h.token, Owner: h.owner, TTL: timeLeft(h.deadline, now), Shared: shared})
		if bytes += len(h.owner); bytes >= HolderPageBytes {
			end = n + k + 1
			break
		}
	}
	if end == len(hs.items) {
		return 0, dst
	}
	return hs.items[end-1].token, dst
}

// Delete removes a free lock and reports whether it existed. It fails with
// ErrInUse while a lease is live (deleting would silently end the lease)
// and with ErrInLockDelay during a lock-delay.
// The next lock of the same name keeps counting tokens from where this one
// stopped.
func (t *Table) Delete(key []byte) (bool, error) {
	h, s := t.locate(key)
	now := int64(t.cfg.Clock.Now())
	s.mu.Lock()
	defer t.unlock(s)
	i := s.find(h, key, now)
	if i == 0 {
		return false, nil
	}
	switch e := s.at(i); {
	case e.flags&flagHeld != 0, s.holders(i) != nil && s.holders(i).live > 0:
		return false, &KeyError{Key: string(key), Err: ErrInUse}
	case s.waiterCount(i) > 0:
		return false, &KeyError{Key: string(key), Err: ErrInUse}
	case e.flags&(flagDelayed|flagMulti) != 0:
		// Deleting would let the next Acquire in at once: the delay is
		// there to stop exactly that.
		return false, &KeyError{Key: string(key), Err: ErrInLockDelay}
	}
	s.emit(EventDeleted, i, 0)
	s.journal(ChangeDelete, i, 0, 0, nil, false)
	s.remove(i)
	return true, nil
}

// Scan visits locks SCAN-style. Start with cursor 0; each call returns the
// cursor to pass next, and 0 when the walk is complete. A lock that exists
// for the whole walk is returned exactly once; one created or removed during
// it may or may not be. count bounds the work of one call, as SCAN's COUNT
// does: it examines at most count locks (and at most 10*count slots, free
// ones included), so it may return fewer names than count, even none, with a
// cursor that is not 0. match, when not nil, filters names and says whether
// the call may go on: once it answers more=false, Scan stops after that lock,
// so a caller can bound the cost of matching too. Names are appended to dst.
func (t *Table) Scan(cursor uint64, count int, match func(key []byte) (keep, more bool), dst []string) (next uint64, keys []string) {
	if count < 1 {
		count = 1
	}
	si, slot := cursor>>32, uint32(cursor)
	slots := 10 * count
	examined := 0
	more := true
	for si < uint64(len(t.shards)) && more && examined < count && slots > 0 {
		s := t.shards[si]
		now := int64(t.cfg.Clock.Now())
		s.mu.Lock()
		if slot == 0 {
			slot = 1
		}
		for ; slot < s.top && more && examined < count && slots > 0; slot++ {
			slots--
			if s.at(slot).flags&flagLive == 0 || s.settle(slot, now) == 0 {
				continue
			}
			examined++
			k := s.key(s.at(slot))
			keep := true
			if match != nil {
				keep, more = match(k)
			}
			if keep {
				dst = append(dst, string(k))
			}
		}
		done := slot >= s.top
		t.unlock(s)
		if done {
			si, slot = si+1, 0
		}
	}
	if si >= uint64(len(t.shards)) {
		return 0, dst
	}
	return si<<32 | uint64(slot), dst
}

// Stats is a snapshot of the table's counters.
type Stats struct {
	Locks    int    // locks in the table
	Held     int    // live leases (some may be past their deadline, awaiting the reaper)
	Granted  uint64 // leases granted
	Renewed  uint64 // leases renewed by Extend or an owner's repeated Acquire
	Released uint64 // leases ended by Release
	Expired  uint64 // leases ended by their deadline
	Delayed  uint64 // lock-delays begun by an expiry
	// Waits counts requests queued by AcquireWait; WaitGrants those granted
	// from the queue; WaitCancels those taken out by CancelWait.
	Waits, WaitGrants, WaitCancels uint64
	// ArenaBytes is the memory held for keys and owners.
	ArenaBytes int
	// TableBytes is the memory the table's own structures hold: entries,
	// index, arenas and free lists, as of the reaper's last tick. It falls
	// when the reaper gives back what a burst of locks left behind.
	TableBytes int
	// TableFullRefusals counts calls refused with ErrTableFull.
	TableFullRefusals uint64
	// HeldShared and HeldPermits count the leases of Held that are
	// readers' (Mode Shared) and semaphore permits; the rest are exclusive.
	HeldShared, HeldPermits int
	// HandOffs counts leases granted to a waiter when the lock passed to it:
	// a lease released, expired or forced, a lock-delay or a wait ahead that
	// ended. A wait granted on its arrival is none.
	HandOffs uint64
	// LockDelayRefusals counts Acquires (not waits) refused because a
	// lock-delay was in the way, with nobody queued.
	LockDelayRefusals uint64
	// WaitTime is the time waits spent queued, until granted or cancelled;
	// HoldTime the time leases were held, from grant to release, forced
	// release or deadline (an expired lease counts up to its deadline);
	// ReaperLateness how long after a lease's deadline the reaper expired
	// it (a lease expired when a command touched it first counts in none).
	// A wait or lease restored from a snapshot or journal counts in none.
	WaitTime, HoldTime, ReaperLateness Histogram
}

// Stats sums the shards' counters. It takes no lock: each counter is read
// atomically, so the sum is a near-instant snapshot, not an exact one.
func (t *Table) Stats() Stats {
	var st Stats
	for _, s := range t.shards {
		c := &s.counts
		st.Locks += int(c.locks.Load())
		st.Held += int(c.held.Load())
		st.ArenaBytes += int(c.arenaBytes.Load())
		st.TableBytes += int(c.tableBytes.Load())
		st.Granted += c.granted.Load()
		st.Renewed += c.renewed.Load()
		st.Released += c.released.Load()
		st.Expired += c.expired.Load()
		st.Delayed += c.delayed.Load()
		st.Waits += c.waits.Load()
		st.WaitGrants += c.waitGrants.Load()
		st.WaitCancels += c.waitCancels.Load()
		m := &s.metrics
		st.HeldShared += int(m.heldShared.Load())
		st.HeldPermits += int(m.heldPermits.Load())
		st.HandOffs += m.handOffs.Load()
		st.LockDelayRefusals += m.delayRefusals.Load()
		m.wait.addTo(&st.WaitTime)
		m.hold.addTo(&st.HoldTime)
		m.lateness.addTo(&st.ReaperLateness)
	}
	if t.bound != nil {
		st.TableFullRefusals = t.bound.refusals.Load()
	}
	return st
}

// OverMaxLocks returns the number of locks in the table and whether it
// exceeds Config.MaxLocks, as it may after Restore; with no bound, over is
// always false.
func (t *Table) OverMaxLocks() (locks int, over bool) {
	if t.bound == nil {
		return t.Stats().Locks, false
	}
	n := t.bound.locks.Load()
	return int(n), n > t.bound.max
}
