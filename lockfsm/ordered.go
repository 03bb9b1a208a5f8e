package lockfsm

// ordered is a map from strings that keeps its entries in order: of
// insertion, or of last use for a caller that moves an entry to the back
// when it uses it. The FSM's tables (sessions, grants) are bounded by
// dropping the front, which makes which entry goes a matter of the log's
// order alone, the same on every replica: a Go map's iteration order never
// decides.
type ordered[V any] struct {
	m          map[string]*item[V]
	head, tail *item[V]
}

type item[V any] struct {
	key        string
	val        V
	prev, next *item[V]
}

func newOrdered[V any]() *ordered[V] { return &ordered[V]{m: make(map[string]*item[V])} }

func (o *ordered[V]) len() int { return len(o.m) }

// get returns key's item, or nil.
func (o *ordered[V]) get(key []byte) *item[V] { return o.m[string(key)] }

// put sets key's value and moves it to the back.
func (o *ordered[V]) put(key []byte, v V) *item[V] {
	it := o.m[string(key)]
	if it == nil {
		it = &item[V]{key: string(key)}
		o.m[it.key] = it
	} else {
		o.unlink(it)
	}
	it.val = v
	o.pushBack(it)
	return it
}

// moveToBack makes it the last.
func (o *ordered[V]) moveToBack(it *item[V]) {
	o.unlink(it)
	o.pushBack(it)
}

// remove drops it.
func (o *ordered[V]) remove(it *item[V]) {
	o.unlink(it)
	delete(o.m, it.key)
}

// front returns the first item, or nil.
func (o *ordered[V]) front() *item[V] { return o.head }

// each calls fn for every item, front first.
func (o *ordered[V]) each(fn func(*item[V])) {
	for it := o.head; it != nil; it = it.next {
		fn(it)
	}
}

func (o *ordered[V]) pushBack(it *item[V]) {
	it.prev, it.next = o.tail, nil
	if o.tail != nil {
		o.tail.next = it
	} else {
		o.head = it
	}
	o.tail = it
}

func (o *ordered[V]) unlink(it *item[V]) {
	if it.prev != nil {
		it.prev.next = it.next
	} else {
		o.head = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	} else {
		o.tail = it.prev
	}
	it.prev, it.next = nil, nil
}
