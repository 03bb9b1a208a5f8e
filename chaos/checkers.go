//go:build linux

package chaos

import (
	"fmt"
	"sort"
	"time"
)

// Violation is a breach of a safety property found in a history.
type Violation struct {
	Check string // which checker
	Key   string
	Msg   string
	Ops   []Op // the operations that show it
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s on %q: %s", v.Check, v.Key, v.Msg)
	for _, o := range v.Ops {
		s += "\n    " + o.String()
	}
	return s
}

// The names of the checkers, as violations and summaries give them.
const (
	CheckLinearizable = "linearizable"
	CheckTokenOrder   = "token-order"
	CheckMaxToken     = "max-token"
	CheckLostAck      = "lost-ack"
	CheckExclusion    = "exclusion"
)

// life is what a history says about one lease (one token of one key).
type life struct {
	key    string
	token  uint64
	owner  string
	shared bool
	limit  int
	grant  Op
	// renewals set the deadline to t + ttl for a t in [call, return]: the
	// grant itself, an OWNER re-entry that returned the token, an EXTEND
	// that answered 1.
	renewals []Op
	// uncertain may have moved the deadline either way, or not: an EXTEND or
	// an OWNER re-entry of unknown outcome.
	uncertain []Op
	releases  []Op // every RELEASE of the token, whatever its outcome
}

// deadlineAfter is a lower bound on the lease's deadline at every moment of
// [from, to], ignoring releases and uncertain operations; 0 when the grant had
// not returned by from. baseCall is the call of the last renewal sent among
// those returned by from.
func (l *life) deadlineAfter(from, to int64) (deadline, baseCall int64) {
	if l.grant.Return > from {
		return 0, -1
	}
	var base int64
	baseCall = -1
	bound := int64(Never)
	for _, r := range l.renewals {
		switch {
		case r.Return <= from:
			if r.Call > baseCall {
				baseCall, base = r.Call, r.Call+int64(r.TTL)
			}
		case r.Call <= to:
			bound = min(bound, r.Call+int64(r.TTL))
		}
	}
	return min(base, bound), baseCall
}

// surelyLive reports whether the history proves the lease live over all of
// [from, to]: granted before, deadline after, no RELEASE sent by to, and no
// operation of unknown outcome sent by to that could have set the deadline
// at or before to. skip is an operation not to count (the one being judged).
//
// An uncertain EXTEND or OWNER re-entry u, if applied, set the deadline to
// its apply time plus u.TTL, like any renewal; the deadline at a moment is
// set by the last renewal applied before it, which was applied no earlier
// than its own call nor than the base renewal (returned by from, so applied
// by then). So u lowers the bound to max(u.Call, baseCall) + u.TTL and no
// further: an uncertain operation sent before the renewal that set the
// deadline does not excuse an early end (chaos finding 1: an OWNER's ACQUIRE
// of unknown outcome, then its retry, excused the loss of the retry's lease).
func (l *life) surelyLive(from, to int64, skip *Op) bool {
	for i := range l.releases {
		if r := &l.releases[i]; r.Call <= to && !sameOp(r, skip) {
			return false
		}
	}
	end, baseCall := l.deadlineAfter(from, to)
	for i := range l.uncertain {
		u := &l.uncertain[i]
		if u.Call > to || sameOp(u, skip) {
			continue
		}
		if u.TTL <= 0 {
			return false // the server's default ttl: no bound known here
		}
		end = min(end, max(u.Call, baseCall)+int64(u.TTL))
	}
	return end > to
}

// latestEnd bounds the deadline from above: no renewal can reach past it
// (Never when one had an unknown outcome).
func (l *life) latestEnd(late Lateness) int64 {
	if len(l.uncertain) > 0 {
		return Never
	}
	var end int64
	for _, r := range l.renewals {
		end = max(end, late.latest(r.Return, r.TTL))
	}
	return end
}

func sameOp(a, b *Op) bool {
	return b != nil && a.Client == b.Client && a.Call == b.Call && a.Kind == b.Kind
}

// lives gathers the leases of one key's operations, by token.
func lives(ops []Op) map[uint64]*life {
	m := make(map[uint64]*life)
	owners := make(map[string]*life) // the owner's current lease, for re-entries of unknown outcome
	for _, o := range ops {
		if !o.granted() {
			continue
		}
		l := m[o.Result]
		if l == nil {
			l = &life{key: o.Key, token: o.Result, owner: o.Owner, shared: o.Shared, limit: o.Limit, grant: o}
			m[o.Result] = l
		}
		l.renewals = append(l.renewals, o)
		if o.Owner != "" {
			owners[o.Owner] = l
		}
	}
	for _, o := range ops {
		switch {
		case o.Kind == Acquire && o.Unknown && o.Owner != "":
			if l := owners[o.Owner]; l != nil && l.shared == o.Shared {
				l.uncertain = append(l.uncertain, o)
			}
		case o.Kind == Extend:
			if l := m[o.Token]; l != nil {
				switch {
				case o.Unknown:
					l.uncertain = append(l.uncertain, o)
				case o.OK:
					l.renewals = append(l.renewals, o)
				}
			}
		case o.Kind == Release:
			if l := m[o.Token]; l != nil {
				l.releases = append(l.releases, o)
			}
		}
	}
	return m
}

// Check runs every checker but porcupine's over a history; late is how
// long past its deadline a lease may still be reported live.
func Check(ops []Op, late Lateness) []Violation {
	var vs []Violation
	keys := byKey(ops)
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		kops := keys[k]
		ls := lives(kops)
		vs = append(vs, checkTokenOrder(k, kops)...)
		vs = append(vs, checkMaxToken(k, kops)...)
		vs = append(vs, checkLostAck(k, kops, ls, late)...)
		vs = append(vs, checkExclusion(k, kops, ls)...)
	}
	return vs
}

// checkTokenOrder: a grant that returned before another was sent has a lower
// token, unless the second is the same owner getting its lease back; and no
// token is granted to two owners.
func checkTokenOrder(key string, ops []Op) []Violation {
	var vs []Violation
	var grants []Op
	first := make(map[uint64]Op)
	for _, o := range ops {
		if !o.granted() {
			continue
		}
		grants = append(grants, o)
		if f, ok := first[o.Result]; ok {
			if o.Owner == "" || f.Owner != o.Owner || f.Shared != o.Shared {
				vs = append(vs, Violation{CheckTokenOrder, key, fmt.Sprintf("token %d granted twice", o.Result), []Op{f, o}})
			}
		} else {
			first[o.Result] = o
		}
	}
	// An OWNER's ACQUIRE whose outcome was unknown may have been granted
	// at any time after its call, and the owner's later ACQUIRE answered
	// with that lease (re-entry): such a grant is ordered from the call of
	// the owner's first unknown ACQUIRE before it, not from its own.
	unknownSince := make(map[string]int64)
	for _, o := range ops {
		if o.Kind == Acquire && o.Unknown && o.Owner != "" {
			if t, ok := unknownSince[o.Owner]; !ok || o.Call < t {
				unknownSince[o.Owner] = o.Call
			}
		}
	}
	since := func(o Op) int64 {
		if t, ok := unknownSince[o.Owner]; ok && o.Owner != "" && t < o.Call {
			return t
		}
		return o.Call
	}
	sort.SliceStable(grants, func(i, j int) bool { return since(grants[i]) < since(grants[j]) })
	byReturn := append([]Op(nil), grants...)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].Return < byReturn[j].Return })
	var top Op
	j := 0
	for _, b := range grants { // by call, or by the owner's unknown call before it
		for ; j < len(byReturn) && byReturn[j].Return < since(b); j++ {
			if byReturn[j].Result > top.Result {
				top = byReturn[j]
			}
		}
		if top.Result > b.Result || top.Result == b.Result && top.Result != 0 && top.Owner != b.Owner {
			vs = append(vs, Violation{CheckTokenOrder, key, fmt.Sprintf("token %d granted after %d had been", b.Result, top.Result), []Op{top, b}})
		}
	}
	return vs
}

// checkMaxToken: STATUS's last-token never goes back, is at least every token
// granted before it was asked, and every new lease granted after it is above it.
func checkMaxToken(key string, ops []Op) []Violation {
	var vs []Violation
	var statuses, grants []Op
	for _, o := range ops {
		switch {
		case o.Kind == Status && !o.Unknown && !o.Nil:
			statuses = append(statuses, o)
		case o.granted():
			grants = append(grants, o)
		}
	}
	byReturn := func(s []Op) []Op {
		r := append([]Op(nil), s...)
		sort.Slice(r, func(i, j int) bool { return r[i].Return < r[j].Return })
		return r
	}
	sr, gr := byReturn(statuses), byReturn(grants)
	var topS, topG Op
	i, j := 0, 0
	for _, s := range statuses {
		for ; i < len(sr) && sr[i].Return < s.Call; i++ {
			if sr[i].Result > topS.Result {
				topS = sr[i]
			}
		}
		for ; j < len(gr) && gr[j].Return < s.Call; j++ {
			if gr[j].Result > topG.Result {
				topG = gr[j]
			}
		}
		if topS.Result > s.Result {
			vs = append(vs, Violation{CheckMaxToken, key, fmt.Sprintf("last-token went back from %d to %d", topS.Result, s.Result), []Op{topS, s}})
		}
		if topG.Result > s.Result {
			vs = append(vs, Violation{CheckMaxToken, key, fmt.Sprintf("last-token %d below token %d granted before", s.Result, topG.Result), []Op{topG, s}})
		}
	}
	held := make(map[string]map[uint64]bool) // owner → tokens granted to it
	// An OWNER whose ACQUIRE had an unknown outcome may have been granted a
	// token nobody saw (STATUS may): its retry gets that token back.
	asked := make(map[string]int64) // owner → call of its first ACQUIRE of unknown outcome
	for _, o := range ops {
		if o.Kind == Acquire && o.Unknown && o.Owner != "" {
			if _, ok := asked[o.Owner]; !ok {
				asked[o.Owner] = o.Call
			}
		}
	}
	i = 0
	topS = Op{}
	for _, g := range grants { // by call
		for ; i < len(sr) && sr[i].Return < g.Call; i++ {
			if sr[i].Result > topS.Result {
				topS = sr[i]
			}
		}
		first, ghost := asked[g.Owner]
		reentry := g.Owner != "" && (held[g.Owner][g.Result] || ghost && first < g.Call)
		if !reentry && g.Result <= topS.Result {
			vs = append(vs, Violation{CheckMaxToken, key, fmt.Sprintf("new token %d not above last-token %d read before", g.Result, topS.Result), []Op{topS, g}})
		}
		if g.Owner != "" {
			if held[g.Owner] == nil {
				held[g.Owner] = make(map[uint64]bool)
			}
			held[g.Owner][g.Result] = true
		}
	}
	return vs
}

// checkLostAck: a lease the history proves live is reported live (VERIFY,
// EXTEND, RELEASE answer 1); one acknowledged released is not; none is live
// past its latest possible deadline plus late.
func checkLostAck(key string, ops []Op, ls map[uint64]*life, late Lateness) []Violation {
	var vs []Violation
	for _, x := range ops {
		if x.Unknown || (x.Kind != Verify && x.Kind != Extend && x.Kind != Release) {
			continue
		}
		l := ls[x.Token]
		if l == nil {
			if x.OK {
				vs = append(vs, Violation{CheckLostAck, key, fmt.Sprintf("token %d, never granted, is live", x.Token), []Op{x}})
			}
			continue
		}
		if !x.OK {
			if l.surelyLive(x.Call, x.Return, &x) {
				d, _ := l.deadlineAfter(x.Call, x.Return)
				vs = append(vs, Violation{CheckLostAck, key, fmt.Sprintf("lease %d lost before its deadline (≥ %.3fs)", x.Token, float64(d)/1e9), append(append([]Op{}, l.renewals...), x)})
			}
			continue
		}
		for _, r := range l.releases {
			if r.OK && !r.Unknown && r.Return < x.Call {
				vs = append(vs, Violation{CheckLostAck, key, fmt.Sprintf("lease %d live after its release", x.Token), []Op{r, x}})
				break
			}
		}
		if end := l.latestEnd(late); end != Never && x.Call > end {
			vs = append(vs, Violation{CheckLostAck, key, fmt.Sprintf("lease %d live %v after its latest deadline (lateness allowed included)", x.Token, time.Duration(x.Call-end)), append(append([]Op{}, l.renewals...), x)})
		}
	}
	return vs
}

// checkExclusion: no lease is granted while the history proves another in its
// way live: an exclusive lease with any other, a read lease with an exclusive
// one, a semaphore's permit while all its permits are held.
func checkExclusion(key string, ops []Op, ls map[uint64]*life) []Violation {
	var vs []Violation
	all := make([]*life, 0, len(ls))
	for _, l := range ls {
		all = append(all, l)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].token < all[j].token })
	for _, b := range ops {
		if !b.granted() || ls[b.Result].grant.Call != b.Call {
			continue // not a grant, or an OWNER's re-entry
		}
		var in []Op
		for _, a := range all {
			if a.token == b.Result || a.grant.Return > b.Call || a.latestEnd(Lateness{}) < b.Call {
				continue
			}
			conflict := b.Limit > 0 || !b.Shared || !a.shared || a.owner == b.Owner && b.Owner != ""
			if conflict && a.surelyLive(b.Call, b.Return, nil) {
				in = append(in, a.grant)
			}
		}
		if b.Limit > 0 && len(in) < b.Limit {
			continue
		}
		if len(in) > 0 {
			vs = append(vs, Violation{CheckExclusion, key, fmt.Sprintf("token %d granted while %d lease(s) in its way were live", b.Result, len(in)), append(in, b)})
		}
	}
	return vs
}
