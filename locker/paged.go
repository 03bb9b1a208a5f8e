package locker

// pageBits sets how many elements a page of a paged slice holds. Growing by
// whole pages, never by copying, keeps the cost of a growing table out of the
// critical section of the operation that happens to grow it.
const pageBits = 10

// paged is a slice that grows by fixed-size pages and never moves an element,
// so an index stays valid and growth never copies. T must hold no pointers for
// the table to stay invisible to the garbage collector.
//
// A page whose elements are all unused can be given back (drop): it then
// reads as a shared placeholder page of zero values, which nobody may write,
// until restore gives it memory again. Indices keep their meaning throughout,
// so a walk by index (Scan, Dump) needs no change: it reads zero values.
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

// drop gives page n's memory back to the heap, leaving placeholder, a page
// of zero values that must never be written, in its place.
func (p *paged[T]) drop(n uint32, placeholder []T) { p.pages[n] = placeholder }

// restore gives dropped page n fresh memory.
func (p *paged[T]) restore(n uint32) { p.pages[n] = make([]T, 1<<pageBits) }

// truncate keeps the first n pages only.
func (p *paged[T]) truncate(n uint32) {
	clear(p.pages[n:])
	p.pages = p.pages[:n]
}
