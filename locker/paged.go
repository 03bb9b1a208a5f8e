package locker

// pageBits sets how many elements a page of a paged slice holds. Growing by
// whole pages, never by copying, keeps the cost of a growing table out of the
// critical section of the operation that happens to grow it.
const pageBits = 10

// paged is a slice that grows by fixed-size pages and never moves an element,
// so an index stays valid and growth never copies. T must hold no pointers for
// the table to stay invisible to the garbage collector.
type paged[T any] struct {
	pages [][]T
}

// at returns the element at i, which must be below capacity.
func (p *paged[T]) at(i uint32) *T {
	return &p.pages[i>>pageBits][i&(1<<pageBits-1)]
}

// capacity is the number of elements the pages hold.
func (p *paged[T]) capacity() uint32 { return uint32(len(p.pages)) << pageBits }

// grow adds pages until index i fits.
func (p *paged[T]) grow(i uint32) {
	for i >= p.capacity() {
		p.pages = append(p.pages, make([]T, 1<<pageBits))
	}
}
