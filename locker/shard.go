package locker

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// entry is one lock: 64 bytes, one cache line, no pointers. A key of up to
// inlineKeyMax bytes is stored in the entry itself, so finding a lock touches
// the index slot and this line only; a longer key lives in the shard's arena,
// its ref in the first bytes of key. The owner id is always in the arena. A
// created lock's settings live in shard.settings, since most locks have none.
type entry struct {
	token    uint64    // last token granted; the live lease's token when held
	deadline int64     // clock ns: the lease's deadline when held, the lock-delay's end when delayed
	timer    wheelNode // links into the shard's timer wheel
	ownerRef uint32
	keyLen   uint16
	ownerLen uint16
	flags    uint8
	key      [inlineKeyMax]byte
}

// inlineKeyMax fills the entry to 64 bytes.
const inlineKeyMax = 27

const (
	flagLive      uint8 = 1 << iota // the slot holds a lock
	flagCreated                     // made by Create: stays when free
	flagHeld                        // a lease is live (until its deadline)
	flagDelayed                     // a lease expired; no grant until deadline (lock-delay)
	flagWaiters                     // shard.waiters has a queue for this lock
	flagMulti                       // shard.holderSets has leases of this lock (see holders.go)
	flagSemaphore                   // created with a limit: every lease is a permit in the holder set
	flagRenewed                     // the live exclusive lease was renewed since its grant (GiveBack)
)

// lockSettings are a created lock's own settings.
type lockSettings struct {
	defaultTTL int64 // ns; 0 for none
	lockDelay  int64 // ns; inheritDelay for the table's default
	limit      int32 // a semaphore's permits; 0 for a lock
}

const inheritDelay = -1

// settingsOf turns Create's options into a lock's settings; options undoes it.
func settingsOf(o CreateOptions) lockSettings {
	st := lockSettings{defaultTTL: int64(o.DefaultTTL), lockDelay: inheritDelay, limit: int32(o.Limit)}
	if o.LockDelaySet {
		st.lockDelay = int64(o.LockDelay)
	}
	return st
}

// makeCreated marks entry i as made by Create, with settings st.
func (s *shard) makeCreated(i uint32, st lockSettings) {
	e := s.at(i)
	e.flags |= flagCreated
	if st.limit > 0 {
		e.flags |= flagSemaphore
	}
	if st != (lockSettings{lockDelay: inheritDelay}) {
		s.settings[i] = st
	}
}

// shard is one independently locked part of the table.
type shard struct {
	mu sync.Mutex // guards every field below

	seed    maphash.Seed // the table's, to rehash a key being removed
	index   keyIndex     // key hash -> entry index
	entries paged[entry] // index 0 is the nil entry
	free    []uint32     // released entry indices, reused first
	top     uint32       // entry indices below top have been handed out
	// pageLive counts the live entries of each page of entries (entry 0
	// counts, so that page 0 is never empty), pageGone for a page given back
	// (see giveBackPages).
	pageLive   []uint32
	emptyPages int                     // pages of entries held with no live entry
	holes      []uint32                // pages of entries given back, reused before top grows; lowest last
	quietTicks int                     // tidy calls in a row that found empty pages kept
	shrinks    int                     // times tidy gave pages back, for tests
	strings    arena                   // keys and owners
	wheel      timerWheel              // lease deadlines; ids are entry indices
	tick       int64                   // the wheel's tick, ns
	settings   map[uint32]lockSettings // created locks that have settings of their own
	waiters    map[uint32]*waitQueue   // locks with requests waiting for them
	// holderSets has the leases of read-held locks and semaphores.
	holderSets map[uint32]*holderSet
	waitSeq    uint64      // arrival order of waiters
	granted    []*Wait     // handed a lease under this lock hold; notified by Table.unlock
	events     *eventBatch // to publish once unlocked; nil until an event happens while the sink is active
	sink       EventSink
	observer   Observer     // sink's, if it is one; nil otherwise
	delay      int64        // the table's default lock-delay, ns
	num        int          // this shard's index in the table
	journalTo  Journal      // nil without one
	budget     *tokenBudget // the journal's token reservation; nil without a journal
	bound      *lockBound   // the table's Config.MaxLocks; nil for none
	change     Change       // the journal's Change, reused

	lastToken uint64 // tokens granted by this shard only grow from here

	// Replicated mode (Config.Replicated); the zero values otherwise.
	replicated bool
	tokens     *slotTokens          // the table's per-slot token counters
	renewals   map[uint32]uint32    // renewals of exclusive leases renewed at least once (Due.Renewals)
	collected  map[collectKey]int64 // CollectDue's items, until they may be returned again; the leader's only
	nextSweep  int64                // when CollectDue next forgets collected items past their retry
	backlog    []uint32             // entries with due items CollectDue had no room for; the leader's only

	// spareEvents is the batch the last publisher gave back, taken under
	// mu and given back after it (Table.unlock); nil while in use.
	spareEvents atomic.Pointer[eventBatch]

	// counts are written under mu but read without it, so that INFO never
	// waits behind the reaper or a long Scan.
	counts  shardCounts
	metrics shardMetrics // see metrics.go
	// grantedAt has the stamp (metrics.go) of each entry's exclusive lease's
	// grant, for its hold time: beside entries, which have no room for it,
	// and paged along with them.
	grantedAt paged[int64]

	_ [64]byte // keep the next shard's mutex off this shard's last cache line
}

type shardCounts struct {
	locks, held, arenaBytes                      atomic.Int64
	tableBytes                                   atomic.Int64 // see footprint; refreshed by tidy and when a page is added
	granted, renewed, released, expired, delayed atomic.Uint64
	waits, waitGrants, waitCancels               atomic.Uint64
}

func newShard(seed maphash.Seed, firstToken uint64, now, tick, lockDelay int64, sink EventSink) *shard {
	observer, _ := sink.(Observer)
	s := &shard{
		sink:       sink,
		observer:   observer,
		seed:       seed,
		top:        1,
		lastToken:  firstToken,
		tick:       tick,
		settings:   make(map[uint32]lockSettings),
		waiters:    make(map[uint32]*waitQueue),
		holderSets: make(map[uint32]*holderSet),
		delay:      lockDelay,
	}
	s.wheel = newTimerWheel(now/tick, s)
	s.entries.grow(0)
	s.grantedAt.grow(0)
	s.pageLive = []uint32{1} // entry 0
	return s
}

// wheelNode and wheelDue make the shard the wheel's node store: timers are
// entries.
func (s *shard) wheelNode(i uint32) *wheelNode { return &s.at(i).timer }
func (s *shard) wheelDue(i uint32) int64       { return ceilDiv(s.at(i).deadline, s.tick) }

// putString stores b in the arena and keeps the arena's size in counts.
func (s *shard) putString(b []byte) uint32 {
	ref := s.strings.put(b)
	s.counts.arenaBytes.Store(int64(s.strings.footprint()))
	return ref
}

func (s *shard) at(i uint32) *entry { return s.entries.at(i) }

func (s *shard) key(e *entry) []byte {
	if e.keyLen <= inlineKeyMax {
		return e.key[:e.keyLen:e.keyLen]
	}
	return s.strings.get(binary.LittleEndian.Uint32(e.key[:4]), int(e.keyLen))
}

func (s *shard) ownerIs(e *entry, owner []byte) bool {
	return len(owner) > 0 && int(e.ownerLen) == len(owner) &&
		bytes.Equal(s.strings.get(e.ownerRef, int(e.ownerLen)), owner)
}

// inScope reports whether e's exclusive lease has an owner that begins with
// scope; a nil scope takes in every lease (see Table.ReleaseScoped).
func (s *shard) inScope(e *entry, scope []byte) bool {
	return scope == nil || int(e.ownerLen) >= len(scope) &&
		bytes.Equal(s.strings.get(e.ownerRef, len(scope)), scope)
}

// holderInScope is inScope for a lease of a holder set.
func holderInScope(owner string, scope []byte) bool {
	return scope == nil || strings.HasPrefix(owner, string(scope))
}

// lookup returns the index of key's entry, or 0. h is the key's hash.
func (s *shard) lookup(h uint32, key []byte) uint32 {
	for i := range s.index.candidates(h) {
		if e := s.at(i); int(e.keyLen) == len(key) && bytes.Equal(s.key(e), key) {
			return i
		}
	}
	return 0
}

// claim takes places for n new locks under the table's bound; call it
// before insert, which does not count.
func (s *shard) claim(n int) error {
	if s.bound == nil {
		return nil
	}
	return s.bound.claim(int64(n))
}

// insert adds an entry for key, which must not be present, and returns its
// index. The caller has claimed its place (see claim).
func (s *shard) insert(h uint32, key []byte) uint32 {
	var i uint32
	if n := len(s.free); n > 0 {
		i = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		i = s.newEntry()
	}
	p := i >> pageBits
	if s.pageLive[p] == 0 {
		s.emptyPages--
	}
	s.pageLive[p]++
	e := s.at(i)
	*e = entry{keyLen: uint16(len(key)), flags: flagLive}
	if len(key) <= inlineKeyMax {
		copy(e.key[:], key)
	} else {
		binary.LittleEndian.PutUint32(e.key[:4], s.putString(key))
	}
	s.index.insert(h, i)
	s.counts.locks.Add(1)
	return i
}

// newEntry hands out an entry index when the free list is empty: the first
// of a page given back, whose others go to the free list, or else top.
func (s *shard) newEntry() uint32 {
	var i uint32
	if n := len(s.holes); n > 0 {
		p := s.holes[n-1]
		s.holes = s.holes[:n-1]
		s.entries.restore(p)
		s.grantedAt.restore(p)
		s.pageLive[p] = 0
		i = p << pageBits
		for j := i + 1<<pageBits - 1; j > i; j-- { // the lowest is reused first
			s.free = append(s.free, j)
		}
	} else {
		i = s.top
		if i == tombstone {
			// The index marks vacated slots with this number; 2^32 entries
			// in one shard is some 256 GiB of them.
			panic("locker: a shard is out of entry numbers")
		}
		s.top++
		s.entries.grow(i)
		s.grantedAt.grow(i)
		if int(i>>pageBits) == len(s.pageLive) {
			s.pageLive = append(s.pageLive, 0)
		} else {
			return i // a page already counted
		}
	}
	s.emptyPages++ // until insert counts i
	s.counts.tableBytes.Store(int64(s.footprint()))
	return i
}

// remove deletes entry i, which must be free.
func (s *shard) remove(i uint32) {
	e := s.at(i)
	key := s.key(e)
	s.index.remove(uint32(maphash.Bytes(s.seed, key)), i)
	if e.keyLen > inlineKeyMax {
		s.strings.release(binary.LittleEndian.Uint32(e.key[:4]), int(e.keyLen))
	}
	if e.flags&flagCreated != 0 {
		delete(s.settings, i)
	}
	*e = entry{}
	s.free = append(s.free, i)
	p := i >> pageBits
	s.pageLive[p]--
	if s.pageLive[p] == 0 {
		s.emptyPages++
	}
	s.counts.locks.Add(-1)
	if s.bound != nil {
		s.bound.locks.Add(-1)
	}
}

// defaultTTL is entry i's default lease ttl in nanoseconds, 0 for none.
func (s *shard) defaultTTL(i uint32) int64 {
	if s.at(i).flags&flagCreated == 0 {
		return 0
	}
	return s.settings[i].defaultTTL
}

// lockDelay is how long entry i stays ungrantable after a lease expires, ns.
func (s *shard) lockDelay(i uint32) int64 {
	if s.at(i).flags&flagCreated != 0 {
		if st, ok := s.settings[i]; ok && st.lockDelay != inheritDelay {
			return st.lockDelay
		}
	}
	return s.delay
}

// grant gives entry i a new lease.
func (s *shard) grant(i uint32, now, ttl int64, owner []byte) uint64 {
	e := s.at(i)
	e.token = s.nextToken(i)
	e.flags = e.flags&^flagRenewed | flagHeld
	e.deadline = now + ttl
	*s.grantedAt.at(i) = stamp(now)
	if len(owner) > 0 {
		e.ownerRef = s.putString(owner)
		e.ownerLen = uint16(len(owner))
	}
	s.journal(ChangeGrant, i, e.token, e.deadline, owner, false)
	s.wheel.schedule(i, s.wheelDue(i))
	s.counts.held.Add(1)
	s.counts.granted.Add(1)
	s.emit(EventAcquired, i, 0)
	return e.token
}

// renew moves the deadline of entry i's live lease.
func (s *shard) renew(i uint32, now, ttl int64) {
	e := s.at(i)
	e.deadline = now + ttl
	e.flags |= flagRenewed
	if s.replicated {
		s.renewals[i]++
	}
	s.wheel.schedule(i, s.wheelDue(i))
	s.journal(ChangeExtend, i, e.token, e.deadline, nil, false)
	s.counts.renewed.Add(1)
	s.emit(EventExtended, i, 0)
}

// heldFor is how long entry i's exclusive lease has been held at end, 0
// when its grant is unknown.
func (s *shard) heldFor(i uint32, end int64) time.Duration {
	d, ok := since(*s.grantedAt.at(i), end)
	if !ok {
		return 0
	}
	return time.Duration(max(d, 0))
}

// endLease frees entry i's lease, which ended at end: now for a release,
// the deadline for an expiry.
func (s *shard) endLease(i uint32, end int64) {
	s.leaseEnded(*s.grantedAt.at(i), end)
	*s.grantedAt.at(i) = 0
	e := s.at(i)
	if e.ownerLen > 0 {
		s.strings.release(e.ownerRef, int(e.ownerLen))
		e.ownerRef, e.ownerLen = 0, 0
	}
	e.flags &^= flagHeld
	s.wheel.cancel(i)
	s.counts.held.Add(-1)
	if s.replicated && len(s.renewals) > 0 {
		delete(s.renewals, i)
	}
}

// removeIfUnused removes entry i if nothing keeps it: it is free, out of its
// lock-delay, nobody waits for it, and it was not made by Create. It reports whether it did.
func (s *shard) removeIfUnused(i uint32) bool {
	if s.at(i).flags&(flagCreated|flagHeld|flagDelayed|flagWaiters|flagMulti) != 0 {
		return false
	}
	s.remove(i)
	return true
}

// settle brings entry i up to date with now, whether or not the wheel has
// fired yet: a lease whose deadline has passed is expired, and enters its
// lock-delay if the lock has one; a lock-delay that has passed ends. It
// returns the entry's index afterwards: i, or 0 when the lock is gone.
// In replicated mode nothing has passed, whatever now says: only Fire ends
// leases and lock-delays.
func (s *shard) settle(i uint32, now int64) uint32 {
	if i == 0 {
		return 0
	}
	expiry := now // what deadlines are judged by; grants are dated from now
	if s.replicated {
		expiry = neverPassed
	}
	e := s.at(i)
	if e.flags&flagHeld != 0 && e.deadline <= expiry {
		s.counts.expired.Add(1)
		s.emitEnd(EventExpired, i, e.deadline)
		s.endLease(i, e.deadline)
		if d := s.lockDelay(i); d > 0 {
			// The delay runs from the deadline, not from whenever this
			// check happens to run.
			e.flags |= flagDelayed
			e.deadline += d
			s.counts.delayed.Add(1)
			s.wheel.schedule(i, s.wheelDue(i))
		}
	}
	if e.flags&flagDelayed != 0 && e.deadline <= expiry {
		e.flags &^= flagDelayed
		s.wheel.cancel(i)
	}
	if e.flags&flagMulti != 0 && e.deadline <= expiry {
		s.settleHolders(i, expiry)
	}
	s.handOff(i, now)
	if s.removeIfUnused(i) {
		return 0
	}
	return i
}

// neverPassed is replicated mode's "now" for expiry checks: no deadline is
// at or before it.
const neverPassed = -1 << 63

// find looks key up and settles it.
func (s *shard) find(h uint32, key []byte, now int64) uint32 {
	return s.settle(s.lookup(h, key), now)
}

// heldBy reports whether entry i's exclusive lease has token. Call after
// settle. Leases in a holder set are found by liveHolder.
func (s *shard) heldBy(i uint32, token uint64) bool {
	if i == 0 {
		return false
	}
	e := s.at(i)
	return e.flags&flagHeld != 0 && e.token == token
}

// expireBatch is the most timers one expireDue call moves or fires, so
// that the reaper holds a shard's lock for tens of microseconds at a time
// even when a million leases fall due together or a wheel level cascades.
const expireBatch = 256

// expireDue advances the wheel towards upTo, expiring the leases and ending
// the lock-delays that are due by now, and moving at most expireBatch
// timers. It returns how many leases it expired and whether it reached
// upTo; if not, the caller drops the lock, so that commands get a turn, and
// calls again.
//
// upTo is the clock when the pass over the shard began and stays the same
// across calls, so that the pass ends; now is read afresh for each call (now
// >= upTo). A batch must judge deadlines, and date the leases it hands to
// waiters, by the time it runs, not by when the pass began: time goes on
// while other commands hold the lock between batches, and another ExpireDue
// with an earlier reading may finish a tick this one left unfinished.
func (s *shard) expireDue(upTo, now int64) (expired int, done bool) {
	before := s.counts.expired.Load()
	done = s.wheel.advanceBudget(upTo/s.tick, expireBatch, func(i uint32) {
		e := s.at(i)
		if e.flags&(flagHeld|flagDelayed|flagMulti) == 0 {
			return
		}
		if e.deadline > now { // a fired wheel slot is a hint; the deadline rules
			s.wheel.schedule(i, s.wheelDue(i))
			return
		}
		// How late the reaper is: from the deadline (a holder set's
		// earliest) to now, once per lease it expires.
		late, before := now-e.deadline, s.counts.expired.Load()
		s.settle(i, now)
		if n := s.counts.expired.Load() - before; n > 0 {
			s.metrics.lateness.observe(late, n)
		}
	})
	return int(s.counts.expired.Load() - before), done
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// vacantEntries is what a page of entries given back reads as: entries that
// are not live, as a walk by index (Scan, Dump) expects. Nothing writes to
// it: only live entries are written, and no index of a page given back is
// handed out before newEntry restores the page.
var vacantEntries = make([]entry, 1<<pageBits)

// vacantStamps is vacantEntries for grantedAt.
var vacantStamps = make([]int64, 1<<pageBits)

// tidy is the reaper's housekeeping for the shard, after each expiry pass
// that reached the present: it carries a pending index move on, and gives
// back to the heap what a burst of locks left behind once they are gone:
// pages of entries and of the arena that no lock uses any more, and the
// index's slots (by steps, see shrinkIfSparse). Each step costs a pass over
// the shard's free lists and pages at most, and happens only after a large
// drop (see shrinkMinPages), never on a command's path. What it gives back
// reaches the OS only once the Go heap returns it (the server's job).
func (s *shard) tidy() {
	s.index.migrateIdle()
	s.index.shrinkIfSparse()
	if s.emptyPages > 0 || s.strings.empty > 0 {
		s.quietTicks++
	} else {
		s.quietTicks = 0
	}
	settled := s.quietTicks >= quietTicks
	gave := s.giveBackPages(settled)
	if s.strings.shrink(settled) {
		gave = true
		s.counts.arenaBytes.Store(int64(s.strings.footprint()))
	}
	if gave {
		s.quietTicks = 0
		s.shrinks++
		// Go's maps never shrink; empty ones that a burst grew (of waits,
		// say) are replaced.
		if len(s.settings) == 0 {
			s.settings = make(map[uint32]lockSettings)
		}
		if len(s.waiters) == 0 {
			s.waiters = make(map[uint32]*waitQueue)
		}
		if len(s.holderSets) == 0 {
			s.holderSets = make(map[uint32]*holderSet)
		}
	}
	s.counts.tableBytes.Store(int64(s.footprint()))
}

// quietTicks is how many reaper ticks in a row empty pages must stay before
// tidy gives them back though they are fewer than a large drop leaves (see
// shrinkNow): a second at the default tick.
const quietTicks = 100

// giveBackPages gives every page of entries with no live entry back to the
// heap when shrinkNow says so, and reports whether it did.
// Entries never move, so that Scan's cursor and every index stay valid: a
// page is given back only when all of it is unused, and a lock that lives
// on keeps its page. Pages given back at the end lower top; the others are
// holes, reused first, lowest first, so that new locks fill the table from
// the bottom.
func (s *shard) giveBackPages(settled bool) bool {
	if !shrinkNow(s.emptyPages, s.entryPagesHeld(), settled) {
		return false
	}
	s.free = keepIf(s.free, func(i uint32) bool { return s.pageLive[i>>pageBits] != 0 })
	for p, n := range s.pageLive {
		if n == 0 {
			s.entries.drop(uint32(p), vacantEntries)
			s.grantedAt.drop(uint32(p), vacantStamps)
			s.pageLive[p] = pageGone
			s.holes = append(s.holes, uint32(p))
		}
	}
	s.emptyPages = 0
	last := uint32(len(s.pageLive))
	for last > 1 && s.pageLive[last-1] == pageGone {
		last--
	}
	if int(last) < len(s.pageLive) {
		s.entries.truncate(last)
		s.grantedAt.truncate(last)
		s.pageLive = s.pageLive[:last]
		s.top = min(s.top, last<<pageBits)
		s.holes = keepIf(s.holes, func(p uint32) bool { return p < last })
	}
	slices.Sort(s.holes)
	slices.Reverse(s.holes) // the lowest is reused first
	return true
}

// entryPagesHeld is the number of pages of entries the shard holds memory for.
func (s *shard) entryPagesHeld() int { return len(s.entries.pages) - len(s.holes) }

// footprint is the bytes the shard's own structures hold from the heap:
// entries, free list, index and arena.
func (s *shard) footprint() int {
	return s.entryPagesHeld()<<pageBits*int(unsafe.Sizeof(entry{})+8) + cap(s.free)*4 +
		s.index.bytes() + s.strings.footprint() + s.strings.listBytes()
}
