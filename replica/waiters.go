package replica

import "sync"

// The waits of this node's clients (ACQUIRE or MACQUIRE ... WAIT in
// cluster mode). The wait queue is the replicated table's (lockfsm's
// OpWait): the lock is handed to the head of its queue inside the apply of
// the entry that frees it, alike on every replica, and the state machine's
// OnGrant reports every hand-off on every replica; this node passes on to
// the server the hand-offs of its own clients' waits only.

// waiters are the waits of this node's clients, by waiter id.
type waiters struct {
	mu sync.Mutex
	m  map[string]func(tokens []uint64)
}

// Await registers waiter (lockfsm.Command.Waiter) before the wait is
// proposed: the node's own replica may apply the entry that hands the lock
// over before the proposal's answer arrives. granted is called once, with
// the tokens (nil: the wait ended ungranted), on the state machine's apply
// goroutine: it must not block. The returned func forgets the waiter.
func (r *Replica) Await(waiter []byte, granted func(tokens []uint64)) (forget func()) {
	w := &r.waiters
	key := string(waiter)
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[string]func([]uint64))
	}
	w.m[key] = granted
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.m, key)
		w.mu.Unlock()
	}
}

// granted is the FSM's OnGrant: it hands tokens (nil: ended ungranted) to
// waiter if it is one of this node's, once, and never blocks (the state
// machine's apply calls it).
func (w *waiters) granted(waiter, _ []byte, tokens []uint64) {
	w.mu.Lock()
	fn := w.m[string(waiter)]
	delete(w.m, string(waiter)) // one hand-off per wait
	w.mu.Unlock()
	if fn != nil {
		fn(tokens)
	}
}
