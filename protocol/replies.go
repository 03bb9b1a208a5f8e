package protocol

import (
	"strconv"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/tidwall/redcon"
)

// StatusFields are the field names of STATUS's reply, in order. A field
// added later goes before holders, which stays the last.
var StatusFields = []string{"state", "token", "owner", "ttl", "last-token", "default-ttl", "created",
	"lock-delay", "delay-left", "waiters", "limit", "mode", "holders-total", "holders"}

// HolderFields are the field names of each entry of STATUS's holders.
var HolderFields = []string{"token", "owner", "ttl"}

// WriteStatus writes STATUS's reply: field/value pairs, the shape of HGETALL,
// every value a string except holders, the last, which is an array with one
// entry per listed lease, each its own field/value pairs (as XINFO nests).
// holders-total counts every live lease; holders lists the oldest
// locker.StatusHolders of them.
// ttl is the lease's remaining time in milliseconds, rounded up so that a
// held lease never shows 0; it is 0 exactly when the lock is not held
// exclusively. delay-left is the same for a lock-delay.
func WriteStatus(w *redcon.Writer, st locker.Status, view OwnerView) {
	state, created, mode := "free", "0", ""
	switch {
	case st.Held:
		state = "held"
	case st.Delayed:
		state = "delayed"
	}
	if st.Created {
		created = "1"
	}
	switch {
	case !st.Held:
	case st.Limit > 0:
		mode = "permits"
	case st.Shared:
		mode = "shared"
	default:
		mode = "exclusive"
	}
	w.WriteArray(2 * len(StatusFields))
	w.WriteBulkString("state")
	w.WriteBulkString(state)
	exclusive := st.Held && st.Token != 0
	owner, visible := view.show(st.Owner)
	w.WriteBulkString("token")
	writeTokenIf(w, st.Token, visible || !exclusive)
	w.WriteBulkString("owner")
	w.WriteBulkString(owner)
	w.WriteBulkString("ttl")
	w.WriteBulkString(strconv.FormatInt(ceilMillis(st.TTL), 10))
	w.WriteBulkString("last-token")
	// The last token is a live lease's while the lock is held: shown with it.
	writeTokenIf(w, st.LastToken, view == nil || !st.Held || exclusive && visible)
	w.WriteBulkString("default-ttl")
	w.WriteBulkString(strconv.FormatInt(ceilMillis(st.DefaultTTL), 10))
	w.WriteBulkString("created")
	w.WriteBulkString(created)
	w.WriteBulkString("lock-delay")
	w.WriteBulkString(strconv.FormatInt(ceilMillis(st.LockDelay), 10))
	w.WriteBulkString("delay-left")
	w.WriteBulkString(strconv.FormatInt(ceilMillis(st.DelayLeft), 10))
	w.WriteBulkString("waiters")
	w.WriteBulkString(strconv.Itoa(st.Waiters))
	w.WriteBulkString("limit")
	w.WriteBulkString(strconv.Itoa(st.Limit))
	w.WriteBulkString("mode")
	w.WriteBulkString(mode)
	w.WriteBulkString("holders-total")
	w.WriteBulkString(strconv.Itoa(st.HoldersTotal))
	w.WriteBulkString("holders")
	writeHolders(w, st.Holders, view)
}

// OwnerView decides what a reply shows of each lease to the client it goes
// to: the owner as shown, or, when visible is false, neither token nor
// owner (both written as empty strings). A nil OwnerView shows every lease
// as it is. The server hides other users' leases from a user (issue 14's
// "tokens are shown only to their holder's user"); this package only writes
// what it is told.
type OwnerView func(owner string) (shown string, visible bool)

func (v OwnerView) show(owner string) (string, bool) {
	if v == nil {
		return owner, true
	}
	shown, visible := v(owner)
	if !visible {
		return "", false
	}
	return shown, true
}

// writeTokenIf writes token, or an empty string in its place when hidden.
func writeTokenIf(w *redcon.Writer, token uint64, shown bool) {
	if shown {
		w.WriteBulkString(strconv.FormatUint(token, 10))
	} else {
		w.WriteBulkString("")
	}
}

// WriteHolders writes HOLDERS's reply, SSCAN's shape: the next cursor, then
// the leases, each an entry as in STATUS's holders.
func WriteHolders(w *redcon.Writer, next uint64, holders []locker.Holder, view OwnerView) {
	w.WriteArray(2)
	w.WriteBulkString(strconv.FormatUint(next, 10))
	writeHolders(w, holders, view)
}

func writeHolders(w *redcon.Writer, holders []locker.Holder, view OwnerView) {
	w.WriteArray(len(holders))
	for _, h := range holders {
		owner, visible := view.show(h.Owner)
		w.WriteArray(2 * len(HolderFields))
		w.WriteBulkString("token")
		writeTokenIf(w, h.Token, visible)
		w.WriteBulkString("owner")
		w.WriteBulkString(owner)
		w.WriteBulkString("ttl")
		w.WriteBulkString(strconv.FormatInt(ceilMillis(h.TTL), 10))
	}
}

// WriteTokens writes MACQUIRE's reply: the tokens in order, or a nil array
// when not granted, as BLPOP answers a timeout.
func WriteTokens(w *redcon.Writer, tokens []uint64) {
	if tokens == nil {
		w.WriteRaw(nullArray)
		return
	}
	w.WriteArray(len(tokens))
	for _, t := range tokens {
		w.WriteUint64(t)
	}
}

// WriteScan writes a SCAN-shaped reply: the next cursor and a list of names.
func WriteScan(w *redcon.Writer, next uint64, names []string) {
	w.WriteArray(2)
	w.WriteBulkString(strconv.FormatUint(next, 10))
	w.WriteArray(len(names))
	for _, n := range names {
		w.WriteBulkString(n)
	}
}

// WriteBool writes Redis's integer boolean, :1 or :0.
func WriteBool(w *redcon.Writer, ok bool) {
	if ok {
		w.WriteInt(1)
	} else {
		w.WriteInt(0)
	}
}

// WriteToken writes a granted token as an integer, or nil when not granted.
func WriteToken(w *redcon.Writer, token uint64, granted bool) {
	if granted {
		w.WriteUint64(token)
	} else {
		w.WriteNull()
	}
}

var nullArray = []byte("*-1\r\n")

func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// YesNo is Redis's spelling of a boolean setting (CONFIG GET, redis.conf).
func YesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
