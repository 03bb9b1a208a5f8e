//go:build linux

package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The model of one lock (porcupine partitions the history by key): a set of
// leases, each with a fencing token, and the floor every new token is above.
//
// Time. A lease ends by expiry at a deadline d the history cannot see: the
// server sets d = t + ttl where t, the moment it granted (or extended), lies
// somewhere in the operation's [call, return]. The model keeps for every
// lease two bounds on d, both on the history's clock:
//
//   - earliest, a lower bound: the grant's linearization point is at least
//     the model's time (below), so d ≥ that time + ttl. The model lets a lease
//     end by expiry only at a moment ≥ earliest. This is the bound that
//     matters: a server that ends a lease early (grants it to another, or
//     answers VERIFY 0, before d) is caught, never excused.
//   - latest, an upper bound: d ≤ return + ttl, plus the Lateness allowed
//     (a cluster may run a lease late across a failover). A lease must be
//     over by then. For a grant or EXTEND of unknown outcome, return is the
//     end of the window it may take effect in (Lateness.Within), or never.
//
// The model's time, now, is the least moment the last operation linearized
// can have taken effect: every operation takes effect at a point in
// [call, return] and the points are in linearization order, so now =
// max(now, call) at each step, raised further when the step needs a lease to
// have expired (to max(now, earliest)), and a step is impossible when now
// would pass the operation's return. Taking the least point is never worse
// for later steps (a later point could only end more leases, which the later
// step can still do itself, and constrains later steps more), so the model
// is deterministic in time; the nondeterminism is in operations of unknown
// outcome (taken effect or not) and in which permits of a semaphore expired.
//
// What the model does not check: an ACQUIRE answering nil is always allowed
// (the lock may have waiters queued, whose place the model does not track),
// so the model checks safety, not fairness or liveness.
type lockState struct {
	now int64
	// maxToken: every new lease's token is above it; the highest token
	// granted, or a lower bound on it after a grant of unknown outcome.
	maxToken uint64
	leases   []lease // sorted by (token, owner, shared, earliest, latest)
}

type lease struct {
	token    uint64 // 0: granted by an ACQUIRE of unknown outcome
	minToken uint64 // token 0: the least its token can be
	owner    string
	shared   bool
	earliest int64
	latest   int64
}

func (l lease) less(m lease) bool {
	if l.token != m.token {
		return l.token < m.token
	}
	if l.owner != m.owner {
		return l.owner < m.owner
	}
	if l.shared != m.shared {
		return !l.shared
	}
	if l.earliest != m.earliest {
		return l.earliest < m.earliest
	}
	return l.latest < m.latest
}

func (s lockState) clone() lockState {
	s.leases = append([]lease(nil), s.leases...)
	return s
}

func (s *lockState) sortLeases() {
	sort.Slice(s.leases, func(i, j int) bool { return s.leases[i].less(s.leases[j]) })
}

// forceExpire drops the leases that must be over at now.
func (s *lockState) forceExpire() {
	kept := s.leases[:0]
	for _, l := range s.leases {
		if l.latest > s.now {
			kept = append(kept, l)
		}
	}
	s.leases = kept
}

// expire ends the leases picked (indexes, any order) by expiry at a moment no
// later than ret; false when one of them cannot have expired by then.
func (s *lockState) expire(picked []int, ret int64) bool {
	for _, i := range picked {
		if s.leases[i].earliest > ret {
			return false
		}
		if s.leases[i].earliest > s.now {
			s.now = s.leases[i].earliest
		}
	}
	drop := make(map[int]bool, len(picked))
	for _, i := range picked {
		drop[i] = true
	}
	kept := s.leases[:0]
	for i, l := range s.leases {
		if !drop[i] {
			kept = append(kept, l)
		}
	}
	s.leases = kept
	s.forceExpire()
	return true
}

func (s lockState) find(token uint64) int {
	for i, l := range s.leases {
		if l.token == token && token != 0 {
			return i
		}
	}
	return -1
}

func plus(t int64, d time.Duration) int64 {
	if t == Never {
		return Never
	}
	return t + int64(d)
}

// Lateness is how long past its deadline a lease may still be reported
// live: Base always (a cluster measures a lease from when it applied the
// grant and decides its expiry through the log), plus, for each outage
// (a fault, on the history's clock) overlapping the lease's extended life,
// that overlap (a cluster without a quorum cannot end a lease, and a restart
// measures it again from the replay). It widens the upper bound only: a
// lease ending early is never excused by it.
type Lateness struct {
	Base    time.Duration
	Outages [][2]int64 // [start, end], by start
	// Within: an operation of unknown outcome takes effect within this long
	// of its call, or never (0: no bound). The bound keeps porcupine's
	// search finite on long runs; a server that applied a request later
	// would be reported, not excused.
	Within time.Duration
}

// closes returns when an operation of unknown outcome called at call has
// taken effect, if it ever does.
func (l Lateness) closes(call int64) int64 {
	if l.Within <= 0 {
		return Never
	}
	return call + int64(l.Within)
}

// latest bounds from above the deadline of a lease granted or extended by an
// operation that returned at ret.
func (l Lateness) latest(ret int64, ttl time.Duration) int64 {
	if ret == Never {
		return Never
	}
	e := ret + int64(ttl) + int64(l.Base)
	for _, o := range l.Outages {
		if o[1] > ret && o[0] < e {
			e += o[1] - max(o[0], ret)
		}
	}
	return e
}

// stepper is the model's step with its settings.
type stepper struct{ late Lateness }

func (m stepper) step(s lockState, o Op) []lockState {
	lo := max(s.now, o.Call)
	if lo > o.Return {
		return nil
	}
	s = s.clone()
	s.now = lo
	s.forceExpire()
	switch o.Kind {
	case Acquire:
		return m.acquire(s, o)
	case Release, Extend, Verify:
		return m.onToken(s, o)
	case Status:
		return m.status(s, o)
	}
	return nil
}

func (m stepper) acquire(s lockState, o Op) []lockState {
	if !o.Unknown && o.Result == 0 {
		return []lockState{s}
	}
	var out []lockState
	if o.Unknown {
		out = append(out, s) // it never took effect, or answered nil
	}
	// An OWNER that holds the lock in this mode gets its lease back, renewed.
	if o.Owner != "" {
		for i, l := range s.leases {
			if l.owner != o.Owner || l.shared != o.Shared {
				continue
			}
			if !o.Unknown && l.token != o.Result && (l.token != 0 || o.Result < l.minToken) {
				continue
			}
			n := s.clone()
			if !o.Unknown {
				n.leases[i].token = o.Result
				n.maxToken = max(n.maxToken, o.Result)
			}
			n.leases[i].earliest = plus(n.now, o.TTL)
			n.leases[i].latest = m.late.latest(o.Return, o.TTL)
			n.sortLeases()
			out = append(out, n)
		}
	}
	// A new lease: above every token granted, once every lease in its way
	// (the owner's own, other modes', a full semaphore's) has ended.
	if !o.Unknown && o.Result <= s.maxToken {
		return out
	}
	var must, may []int
	for i, l := range s.leases {
		switch {
		case o.Owner != "" && l.owner == o.Owner:
			must = append(must, i)
		case o.Limit > 0:
			may = append(may, i)
		case !o.Shared || !l.shared:
			must = append(must, i)
		}
	}
	need := 0
	if o.Limit > 0 && len(may) >= o.Limit {
		need = len(may) - o.Limit + 1
	}
	for _, extra := range combinations(may, need) {
		n := s.clone()
		if !n.expire(append(append([]int(nil), must...), extra...), o.Return) {
			continue
		}
		nl := lease{owner: o.Owner, shared: o.Shared, earliest: plus(n.now, o.TTL), latest: m.late.latest(o.Return, o.TTL)}
		if o.Unknown {
			nl.minToken = n.maxToken + 1
			n.maxToken++
		} else {
			nl.token = o.Result
			n.maxToken = o.Result
		}
		n.leases = append(n.leases, nl)
		n.sortLeases()
		out = append(out, n)
	}
	return out
}

// combinations lists the ways to pick k of the indexes (k = 0: one, empty).
func combinations(of []int, k int) [][]int {
	if k == 0 {
		return [][]int{nil}
	}
	if k > len(of) {
		return nil
	}
	var out [][]int
	for _, rest := range combinations(of[1:], k-1) {
		out = append(out, append([]int{of[0]}, rest...))
	}
	return append(out, combinations(of[1:], k)...)
}

func (m stepper) onToken(s lockState, o Op) []lockState {
	i := s.find(o.Token)
	if o.Unknown {
		out := []lockState{s}
		if i >= 0 {
			n := s.clone()
			if o.Kind == Release {
				n.leases = append(n.leases[:i], n.leases[i+1:]...)
			} else { // Extend
				n.leases[i].earliest = plus(n.now, o.TTL)
				n.leases[i].latest = m.late.latest(o.Return, o.TTL)
				n.sortLeases()
			}
			out = append(out, n)
		}
		return out
	}
	if !o.OK {
		// The token holds nothing: never granted, released, or expired by
		// the time this took effect.
		if i < 0 {
			return []lockState{s}
		}
		if !s.expire([]int{i}, o.Return) {
			return nil
		}
		return []lockState{s}
	}
	if i < 0 {
		return nil
	}
	switch o.Kind {
	case Release:
		s.leases = append(s.leases[:i], s.leases[i+1:]...)
	case Extend:
		s.leases[i].earliest = plus(s.now, o.TTL)
		s.leases[i].latest = m.late.latest(o.Return, o.TTL)
		s.sortLeases()
	}
	return []lockState{s}
}

func (m stepper) status(s lockState, o Op) []lockState {
	if o.Nil {
		// An unknown lock: never created, and every lease over.
		if o.Created {
			return nil
		}
		all := make([]int, len(s.leases))
		for i := range all {
			all[i] = i
		}
		if !s.expire(all, o.Return) {
			return nil
		}
		return []lockState{s}
	}
	// last-token may be above every token a client saw granted: a lease
	// handed to a waiter that gave up in the same instant is granted and
	// released at once, its token spent. So it is a floor, not a value.
	if o.Result < s.maxToken {
		return nil
	}
	s.maxToken = o.Result
	return []lockState{s}
}

func (s lockState) equal(t lockState) bool {
	if s.now != t.now || s.maxToken != t.maxToken || len(s.leases) != len(t.leases) {
		return false
	}
	for i := range s.leases {
		if s.leases[i] != t.leases[i] {
			return false
		}
	}
	return true
}

func (s lockState) hash() uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	mix := func(v uint64) { h = (h ^ v) * prime }
	mix(uint64(s.now))
	mix(s.maxToken)
	for _, l := range s.leases {
		mix(l.token)
		mix(l.minToken)
		mix(uint64(l.earliest))
		mix(uint64(l.latest))
		for i := 0; i < len(l.owner); i++ {
			mix(uint64(l.owner[i]))
		}
	}
	return h
}

func (s lockState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "now=%.3fs max≥%d", float64(s.now)/1e9, s.maxToken)
	for _, l := range s.leases {
		tok := fmt.Sprint(l.token)
		if l.token == 0 {
			tok = fmt.Sprintf("?≥%d", l.minToken)
		}
		latest := "∞"
		if l.latest != Never {
			latest = fmt.Sprintf("%.3fs", float64(l.latest)/1e9)
		}
		mode := ""
		if l.shared {
			mode = " shared"
		}
		fmt.Fprintf(&b, " [%s %q%s ends %.3fs..%s]", tok, l.owner, mode, float64(l.earliest)/1e9, latest)
	}
	return b.String()
}

// Model is the porcupine model of one fenced lease lock; late says how long
// after its deadline a lease may still be reported live.
func Model(late Lateness) porcupine.Model {
	m := stepper{late: late}
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{lockState{}} },
		Step: func(state, input, _ interface{}) []interface{} {
			var out []interface{}
			for _, n := range m.step(state.(lockState), input.(Op)) {
				out = append(out, n)
			}
			return out
		},
		Equal:             func(a, b interface{}) bool { return a.(lockState).equal(b.(lockState)) },
		Hash:              func(s interface{}) uint64 { return s.(lockState).hash() },
		DescribeOperation: func(input, _ interface{}) string { return input.(Op).String() },
		DescribeState:     func(s interface{}) string { return s.(lockState).String() },
	}
	return nm.ToModel()
}

// KeyResult is porcupine's verdict on one key's history.
type KeyResult struct {
	Key    string
	Ops    int
	Result porcupine.CheckResult
	Info   porcupine.LinearizationInfo
}

// Linearizable checks each key's operations against the model, each
// within timeout (porcupine.Unknown when it runs out).
func Linearizable(ops []Op, late Lateness, timeout time.Duration) []KeyResult {
	model := Model(late)
	var out []KeyResult
	keys := byKey(ops)
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		var pops []porcupine.Operation
		for _, o := range unobservedDropped(keys[k]) {
			if o.Unknown {
				o.Return = late.closes(o.Call)
			}
			pops = append(pops, porcupine.Operation{ClientId: o.Client, Input: o, Call: o.Call, Output: o, Return: o.Return})
		}
		res, info := porcupine.CheckOperationsVerbose(model, pops, timeout)
		out = append(out, KeyResult{Key: k, Ops: len(pops), Result: res, Info: info})
	}
	return out
}

// unobservedDropped leaves out the ACQUIREs of unknown outcome whose effect
// nothing in the history could have seen: no later ACQUIRE of the same OWNER
// got a token. (STATUS's last-token is only a floor, so it needs no grant
// to explain it.) Such a request not taking effect explains the history at
// least as well as it taking effect (its lease would only hold the lock
// longer, take a permit and raise the token floor), so leaving it out
// changes no verdict, and it spares porcupine a branch per request: a run
// with many timeouts on a semaphore otherwise runs out of time.
func unobservedDropped(ops []Op) []Op {
	retried := make(map[string]int64) // owner → call of its last ACQUIRE that got a token
	for _, o := range ops {
		if o.granted() && o.Owner != "" {
			retried[o.Owner] = max(retried[o.Owner], o.Call)
		}
	}
	out := make([]Op, 0, len(ops))
	for _, o := range ops {
		if o.Kind == Acquire && o.Unknown && (o.Owner == "" || retried[o.Owner] < o.Call) {
			continue
		}
		out = append(out, o)
	}
	return out
}
