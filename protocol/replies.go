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
func WriteStatus(w *redcon.Writer, st locker.Status) {
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
	w.WriteBulkString("token")
	w.WriteBulkString(strconv.FormatUint(st.Token, 10))
	w.WriteBulkString("owner")
	w.WriteBulkString(st.Owner)
	w.WriteBulkString("ttl")
	w.WriteBulkString(strconv.FormatInt(ceilMillis(st.TTL), 10))
	w.WriteBulkString("last-token")
	w.WriteBulkString(strconv.FormatUint(st.LastToken, 10))
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
	writeHolders(w, st.Holders)
}

// WriteHolders writes HOLDERS's reply, SSCAN's shape: the next cursor, then
// the leases, each an entry as in STATUS's holders.
func WriteHolders(w *redcon.Writer, next uint64, holders []locker.Holder) {
	w.WriteArray(2)
	w.WriteBulkString(strconv.FormatUint(next, 10))
	writeHolders(w, holders)
}

func writeHolders(w *redcon.Writer, holders []locker.Holder) {
	w.WriteArray(len(holders))
	for _, h := range holders {
		w.WriteArray(2 * len(HolderFields))
		w.WriteBulkString("token")
		w.WriteBulkString(strconv.FormatUint(h.Token, 10))
		w.WriteBulkString("owner")
		w.WriteBulkString(h.Owner)
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
