package lockfsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leasehold/leasehold/locker"
)

// Op names a command.
type Op uint8

// The commands. Each field a command uses is listed; others are zero.
const (
	// OpTerm starts a leader's term: Term, and Floor, the lowest token the
	// term may grant (its leader's boot-epoch token), which keeps tokens
	// above any issued before a restore from an old snapshot.
	OpTerm         Op = iota + 1
	OpCreate          // Key, Options
	OpAcquire         // Key, TTL, Owner, Shared
	OpAcquireAll      // Keys, TTL, Owner, Shared
	OpRelease         // Key, Token, Scope
	OpExtend          // Key, Token, TTL, Scope
	OpDelete          // Key
	OpForceRelease    // Key, Token (locker.AllLeases: every lease)
	OpFire            // Term, Due: expiries the leader of Term decided
	opEnd
)

// Command is one request to the lock table, as a leader proposes it.
type Command struct {
	Op      Op
	Key     []byte
	Keys    [][]byte
	Owner   []byte // already scoped to its user by the server
	Scope   []byte // RELEASE and EXTEND act on leases in it only; nil: any
	Token   uint64
	TTL     time.Duration
	Shared  bool
	Options locker.CreateOptions
	Term    uint64
	Floor   uint64
	Due     []locker.Due
}

// entryVersion starts every entry, so that a later format can be told
// apart and an older replica refuses it rather than misreading it.
const entryVersion = 1

// ErrBadEntry is the error of an entry that does not decode.
var ErrBadEntry = errors.New("lockfsm: malformed log entry")

// AppendEntry appends the encoding of a batch of commands to dst.
func AppendEntry(dst []byte, cmds []Command) []byte {
	dst = append(dst, entryVersion)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for i := range cmds {
		dst = appendCommand(dst, &cmds[i])
	}
	return dst
}

func appendCommand(dst []byte, c *Command) []byte {
	dst = append(dst, byte(c.Op))
	switch c.Op {
	case OpTerm:
		dst = binary.AppendUvarint(dst, c.Term)
		dst = binary.AppendUvarint(dst, c.Floor)
	case OpCreate:
		dst = appendBytes(dst, c.Key)
		dst = binary.AppendVarint(dst, int64(c.Options.DefaultTTL))
		dst = binary.AppendVarint(dst, int64(c.Options.LockDelay))
		dst = appendBool(dst, c.Options.LockDelaySet)
		dst = binary.AppendVarint(dst, int64(c.Options.Limit))
	case OpAcquire:
		dst = appendBytes(dst, c.Key)
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = appendBytes(dst, c.Owner)
		dst = appendBool(dst, c.Shared)
	case OpAcquireAll:
		dst = binary.AppendUvarint(dst, uint64(len(c.Keys)))
		for _, k := range c.Keys {
			dst = appendBytes(dst, k)
		}
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = appendBytes(dst, c.Owner)
		dst = appendBool(dst, c.Shared)
	case OpRelease:
		dst = appendBytes(dst, c.Key)
		dst = binary.AppendUvarint(dst, c.Token)
		dst = appendScope(dst, c.Scope)
	case OpExtend:
		dst = appendBytes(dst, c.Key)
		dst = binary.AppendUvarint(dst, c.Token)
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = appendScope(dst, c.Scope)
	case OpDelete:
		dst = appendBytes(dst, c.Key)
	case OpForceRelease:
		dst = appendBytes(dst, c.Key)
		dst = binary.AppendUvarint(dst, c.Token)
	case OpFire:
		dst = binary.AppendUvarint(dst, c.Term)
		dst = binary.AppendUvarint(dst, uint64(len(c.Due)))
		for _, d := range c.Due {
			dst = append(dst, byte(d.Kind))
			dst = appendBytes(dst, []byte(d.Key))
			dst = binary.AppendUvarint(dst, d.Token)
			dst = binary.AppendUvarint(dst, uint64(d.Renewals))
		}
	default:
		panic(fmt.Sprintf("lockfsm: encoding unknown op %d", c.Op))
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// appendScope tells a nil scope (every lease) from an empty one.
func appendScope(dst, scope []byte) []byte {
	if scope == nil {
		return append(dst, 0)
	}
	return appendBytes(append(dst, 1), scope)
}

// DecodeEntry decodes a batch of commands. The commands' byte slices alias
// entry.
func DecodeEntry(entry []byte) ([]Command, error) {
	d := decoder{b: entry}
	if v := d.byte(); v != entryVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadEntry, v, entryVersion)
	}
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) { // each command takes a byte at least
		return nil, ErrBadEntry
	}
	cmds := make([]Command, n)
	for i := range cmds {
		d.command(&cmds[i])
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last command", ErrBadEntry, len(d.b))
	}
	return cmds, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err, d.b = ErrBadEntry, nil }

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	b := d.b[0]
	d.b = d.b[1:]
	return b
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint32() uint32 {
	v := d.uvarint()
	if v > math.MaxUint32 {
		d.fail()
	}
	return uint32(v)
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail()
	return false
}

func (d *decoder) scope() []byte {
	if !d.bool() {
		return nil
	}
	if b := d.bytes(); b != nil {
		return b
	}
	return []byte{}
}

func (d *decoder) command(c *Command) {
	c.Op = Op(d.byte())
	switch c.Op {
	case OpTerm:
		c.Term, c.Floor = d.uvarint(), d.uvarint()
	case OpCreate:
		c.Key = d.bytes()
		c.Options.DefaultTTL = time.Duration(d.varint())
		c.Options.LockDelay = time.Duration(d.varint())
		c.Options.LockDelaySet = d.bool()
		c.Options.Limit = int(d.varint())
	case OpAcquire:
		c.Key, c.TTL, c.Owner, c.Shared = d.bytes(), time.Duration(d.varint()), d.bytes(), d.bool()
	case OpAcquireAll:
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			d.fail()
			return
		}
		c.Keys = make([][]byte, n)
		for i := range c.Keys {
			c.Keys[i] = d.bytes()
		}
		c.TTL, c.Owner, c.Shared = time.Duration(d.varint()), d.bytes(), d.bool()
	case OpRelease:
		c.Key, c.Token, c.Scope = d.bytes(), d.uvarint(), d.scope()
	case OpExtend:
		c.Key, c.Token, c.TTL, c.Scope = d.bytes(), d.uvarint(), time.Duration(d.varint()), d.scope()
	case OpDelete:
		c.Key = d.bytes()
	case OpForceRelease:
		c.Key, c.Token = d.bytes(), d.uvarint()
	case OpFire:
		c.Term = d.uvarint()
		n := d.uvarint()
		if n > uint64(len(d.b)) {
			d.fail()
			return
		}
		c.Due = make([]locker.Due, n)
		for i := range c.Due {
			c.Due[i] = locker.Due{Kind: locker.DueKind(d.byte()), Key: string(d.bytes()), Token: d.uvarint(), Renewals: d.uint32()}
		}
	default:
		d.fail()
	}
	if len(c.Owner) == 0 {
		c.Owner = nil // an empty OWNER is refused by the parser: nil is "none"
	}
}
