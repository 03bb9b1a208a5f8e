package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/bin"
	"github.com/leasehold/leasehold/locker"
)

// Entry kinds within a record. The locker's change kinds keep their values;
// the rest are persist's own.
const (
	kindCreate  = byte(locker.ChangeCreate)
	kindDelete  = byte(locker.ChangeDelete)
	kindGrant   = byte(locker.ChangeGrant)
	kindExtend  = byte(locker.ChangeExtend)
	kindRelease = byte(locker.ChangeRelease)
	kindReserve = 16 // tokens up to Token may have been issued
	kindLock    = 17 // a snapshot's lock, whole
	kindHeader  = 18 // a snapshot's first entry: format version, token ceiling
	kindEnd     = 19 // a snapshot's last entry: the number of locks in it
	kindTime    = 20 // a time mark: the host's clocks and the directory's time line
)

// formatVersion is written in every snapshot header; a reader refuses a
// newer one. Version 2 added time marks (kindTime, in logs and snapshots);
// version 1 files, which have none, are still read.
const formatVersion = 2

// Entry is one decoded change, reservation, time mark or snapshot lock.
// Deadlines are instants on the directory's time line (see timeMark).
type entry struct {
	kind     byte
	key      []byte
	token    uint64 // grant, extend, release; the ceiling of a reservation or header; the count of an end
	deadline int64  // grant, extend; the time of a create
	owner    []byte
	shared   bool
	options  locker.CreateOptions
	lock     lockModel // kindLock
	mark     timeMark  // kindTime
}

var errShort = errors.New("entry cut short")

// appendChange encodes a locker change, its deadline already on the
// directory's time line.
func appendChange(b []byte, c *locker.Change, deadline int64) []byte {
	b = append(b, byte(c.Kind))
	b = appendBytes(b, c.Key)
	switch c.Kind {
	case locker.ChangeCreate:
		b = appendOptions(b, c.Options)
		b = binary.AppendVarint(b, deadline) // the create's time
	case locker.ChangeGrant:
		b = binary.AppendUvarint(b, c.Token)
		b = binary.AppendVarint(b, deadline)
		b = appendBytes(b, c.Owner)
		b = appendBool(b, c.Shared)
	case locker.ChangeExtend:
		b = binary.AppendUvarint(b, c.Token)
		b = binary.AppendVarint(b, deadline)
	case locker.ChangeRelease:
		b = binary.AppendUvarint(b, c.Token)
	}
	return b
}

func appendReserve(b []byte, ceiling uint64) []byte {
	b = append(b, kindReserve)
	b = appendBytes(b, nil)
	return binary.AppendUvarint(b, ceiling)
}

func appendTimeMark(b []byte, m timeMark) []byte {
	b = append(b, kindTime)
	b = appendBytes(b, nil)
	b = appendBytes(b, []byte(m.bootID))
	b = binary.AppendVarint(b, m.boottime)
	b = binary.AppendVarint(b, m.wall)
	return binary.AppendVarint(b, m.stamp)
}

func appendEnd(b []byte, locks uint64) []byte {
	b = append(b, kindEnd)
	b = appendBytes(b, nil)
	return binary.AppendUvarint(b, locks)
}

func appendHeader(b []byte, ceiling uint64) []byte {
	b = append(b, kindHeader)
	b = appendBytes(b, nil)
	b = binary.AppendUvarint(b, formatVersion)
	return binary.AppendUvarint(b, ceiling)
}

// appendLock encodes a snapshot's lock.
func appendLock(b []byte, key []byte, m *lockModel) []byte {
	b = append(b, kindLock)
	b = appendBytes(b, key)
	b = appendBool(b, m.created)
	b = appendOptions(b, m.options)
	b = binary.AppendUvarint(b, m.lastToken)
	b = binary.AppendUvarint(b, uint64(len(m.leases)))
	for _, l := range m.leases {
		b = binary.AppendUvarint(b, l.token)
		b = binary.AppendVarint(b, l.deadline)
		b = appendBytes(b, l.owner)
		b = appendBool(b, l.shared)
		b = binary.AppendVarint(b, l.delayedUntil)
	}
	return b
}

func appendOptions(b []byte, o locker.CreateOptions) []byte {
	b = binary.AppendUvarint(b, uint64(o.DefaultTTL))
	b = appendBool(b, o.LockDelaySet)
	b = binary.AppendUvarint(b, uint64(o.LockDelay))
	return binary.AppendUvarint(b, uint64(o.Limit))
}

var (
	appendBytes = bin.AppendBytes
	appendBool  = bin.AppendBool
)

// decoder reads entries from one record.
type decoder struct{ bin.Decoder }

func newDecoder(b []byte) *decoder { return &decoder{bin.Decoder{B: b, Short: errShort}} }

func (d *decoder) bool() bool { return d.Byte() != 0 }

func (d *decoder) options() locker.CreateOptions {
	var o locker.CreateOptions
	o.DefaultTTL = time.Duration(d.Uvarint())
	o.LockDelaySet = d.bool()
	o.LockDelay = time.Duration(d.Uvarint())
	o.Limit = int(d.Uvarint())
	return o
}

// next decodes one entry. Byte slices alias the record.
func (d *decoder) next() (entry, error) {
	e := entry{kind: d.Byte()}
	e.key = d.Bytes()
	switch e.kind {
	case kindCreate:
		e.options = d.options()
		e.deadline = d.Varint()
	case kindDelete:
	case kindGrant:
		e.token = d.Uvarint()
		e.deadline = d.Varint()
		e.owner = d.Bytes()
		e.shared = d.bool()
	case kindExtend:
		e.token = d.Uvarint()
		e.deadline = d.Varint()
	case kindRelease, kindReserve, kindEnd:
		e.token = d.Uvarint()
	case kindHeader:
		if v := d.Uvarint(); d.Err == nil && (v < 1 || v > formatVersion) {
			return e, fmt.Errorf("snapshot format version %d, this build reads %d", v, formatVersion)
		}
		e.token = d.Uvarint()
	case kindTime:
		e.mark = timeMark{bootID: string(d.Bytes()), boottime: d.Varint(), wall: d.Varint(), stamp: d.Varint()}
	case kindLock:
		m := &e.lock
		m.created = d.bool()
		m.options = d.options()
		m.lastToken = d.Uvarint()
		n := d.Uvarint()
		if n > uint64(len(d.B)) { // each lease takes bytes: a bad count cannot allocate much
			d.Fail()
			break
		}
		for range n {
			m.leases = append(m.leases, leaseModel{token: d.Uvarint(), deadline: d.Varint(), owner: d.Bytes(), shared: d.bool(), delayedUntil: d.Varint()})
		}
	default:
		return e, fmt.Errorf("unknown entry kind %d", e.kind)
	}
	return e, d.Err
}
