// Package bin is the small binary encoding the data directory's records
// (persist) and the Raft log's entries (lockfsm) share: unsigned and signed
// varints, length-prefixed bytes, booleans as one byte, and a Decoder whose
// first error sticks, so that a caller reads a whole record and checks once.
package bin

import "encoding/binary"

// AppendBytes appends b with its length in front.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendBool appends v as one byte, 1 or 0.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// Decoder reads what the Append functions wrote. Once a read fails (the
// input ends early, a varint is malformed, or the caller calls Fail), Err
// is set and every later read returns a zero value, consuming nothing.
type Decoder struct {
	B     []byte // what is left to read
	Err   error  // the first failure, or nil
	Short error  // the error a failed read sets
}

// Fail sets Err to Short, unless it is set already, and drops the rest of
// the input.
func (d *Decoder) Fail() {
	if d.Err == nil {
		d.Err = d.Short
	}
	d.B = nil
}

// More reports whether there is input left and no failure.
func (d *Decoder) More() bool { return d.Err == nil && len(d.B) > 0 }

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.Err != nil || len(d.B) == 0 {
		d.Fail()
		return 0
	}
	c := d.B[0]
	d.B = d.B[1:]
	return c
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads length-prefixed bytes, which alias the input.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.Err != nil || n > uint64(len(d.B)) {
		d.Fail()
		return nil
	}
	p := d.B[:n:n]
	d.B = d.B[n:]
	return p
}
