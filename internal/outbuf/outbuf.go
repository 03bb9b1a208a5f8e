package outbuf

// Buf is an event-loop connection's unsent output (the bytes its socket
// has not taken yet), kept in blocks in order, so that neither appending
// nor writing moves what waits. One slice did both: a subscriber 32 MiB
// behind cost the loop a copy of its whole backlog each time the slice grew,
// and a slow reader one each time the socket took part of it, while every
// other client of the loop waited.
type Buf struct {
	blocks [][]byte
	off    int // bytes of blocks[0] already written
	n      int // bytes not yet written
}

// Blocks start small, for the common case of a reply the socket took all
// but a little of, and double up to blockMax, the most one write sends.
const (
	blockMin = 4 << 10
	blockMax = 64 << 10
)

// Len returns the number of bytes not yet written.
func (o *Buf) Len() int { return o.n }

// Append queues p after what waits.
func (o *Buf) Append(p []byte) {
	o.n += len(p)
	for len(p) > 0 {
		k := len(o.blocks)
		if k == 0 || len(o.blocks[k-1]) == cap(o.blocks[k-1]) {
			size := blockMin
			if k > 0 {
				size = min(2*cap(o.blocks[k-1]), blockMax)
			}
			o.blocks = append(o.blocks, make([]byte, 0, size))
			k++
		}
		last := o.blocks[k-1]
		m := min(cap(last)-len(last), len(p))
		o.blocks[k-1] = append(last, p[:m]...)
		p = p[m:]
	}
}

// WriteTo hands write what waits, a block at a time, until write takes less
// than it is given (the socket is full) or fails; it returns write's error.
func (o *Buf) WriteTo(write func([]byte) (int, error)) error {
	for len(o.blocks) > 0 {
		b := o.blocks[0][o.off:]
		n, err := write(b)
		o.off += n
		o.n -= n
		if err != nil {
			return err
		}
		if n < len(b) {
			return nil
		}
		o.blocks[0] = nil
		o.blocks = o.blocks[1:]
		o.off = 0
	}
	o.blocks = nil // the burst's block list goes with it
	return nil
}
