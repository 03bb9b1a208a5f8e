package lockfsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leasehold/leasehold/internal/bin"
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
	OpEndSession      // Client: forget its session (its connection closed)
	OpWait            // Key, TTL, Owner, Shared, Priority, Waiter, Wait: ACQUIRE ... WAIT (see the package doc)
	OpCancelWait      // Waiter: its wait gives up (see the package doc)
	OpSettings        // Settings: the leader's lock-table settings (FSM.SettingsMismatch)
	OpWaitAll         // Keys, TTL, Owner, Shared, Priority, Waiter, Wait: MACQUIRE ... WAIT
	OpGrace           // TTL: every live lease runs at least this long from now (FSM.applyGrace)
	// The operations of Redis lock libraries (SET ... NX, their scripts):
	OpAcquireNew     // Key, TTL, Owner: OpAcquire refused when Owner holds the lock already (SET NX)
	OpAcquireAllNew  // Keys, TTL, Owner: OpAcquireAll likewise
	OpReleaseOwned   // Key, Owner (nil: any), Scope: locker.Table.ReleaseOwned
	OpExtendOwned    // Key, Owner (nil: any), Scope, TTL, AddTTL: locker.Table.ExtendOwned
	OpOwnedTTL       // Key, Owner: locker.Table.OwnedTTL, a read that changes nothing
	OpExtendAllOwned // Keys, Owner, TTL: locker.Table.ExtendAllOwned
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
	AddTTL  bool // OpExtendOwned: TTL is added to the time left
	Options locker.CreateOptions
	Term    uint64
	Floor   uint64
	Due     []locker.Due
	Client  []byte // OpEndSession's: a Tag's Client
	// OpWait's: Waiter names the wait across nodes (opaque; the server
	// uses its node, the connection and a sequence number), Wait is how
	// long it may queue, Priority its place in the queue.
	Waiter   []byte
	Wait     time.Duration
	Priority int
	// OpSettings's: the proposing leader's Settings.
	Settings []byte
}

// Tag makes an entry's commands apply at most once: a leader that gets the
// same tagged batch twice (a follower's forward retried after a lost
// answer) applies it once and answers the retry with the results it
// recorded. See FSM.Apply.
type Tag struct {
	// Client names who proposes, opaque to the FSM: the server uses its
	// node and the client's connection. Empty: the entry has no tag.
	Client []byte
	// Seq numbers the client's batches; it grows with each new one, and a
	// retry sends the same.
	Seq uint64
}

// entryVersion starts every entry, so that a later format can be told
// apart and an older replica refuses it rather than misreading it. Version
// 2 added the tag; entries of version 1 (no tag) still decode.
const (
	entryVersion   = 2
	entryVersionV1 = 1
)

// ErrBadEntry is the error of an entry that does not decode.
var ErrBadEntry = errors.New("lockfsm: malformed log entry")

// AppendEntry appends the encoding of a batch of commands, with no tag, to
// dst.
func AppendEntry(dst []byte, cmds []Command) []byte {
	return AppendTaggedEntry(dst, Tag{}, cmds)
}

// AppendTaggedEntry appends the encoding of a batch of commands with its
// tag to dst. A tag with an empty Client is none.
func AppendTaggedEntry(dst []byte, tag Tag, cmds []Command) []byte {
	dst = append(dst, entryVersion)
	if len(tag.Client) == 0 {
		dst = append(dst, 0)
	} else {
		dst = appendBytes(append(dst, 1), tag.Client)
		dst = binary.AppendUvarint(dst, tag.Seq)
	}
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
	case OpAcquireNew:
		dst = appendBytes(dst, c.Key)
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = appendBytes(dst, c.Owner)
	case OpAcquireAllNew:
		dst = appendKeys(dst, c.Keys)
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = appendBytes(dst, c.Owner)
	case OpReleaseOwned:
		dst = appendBytes(dst, c.Key)
		dst = appendScope(dst, c.Owner)
		dst = appendScope(dst, c.Scope)
	case OpExtendOwned:
		dst = appendBytes(dst, c.Key)
		dst = appendScope(dst, c.Owner)
		dst = appendScope(dst, c.Scope)
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = appendBool(dst, c.AddTTL)
	case OpOwnedTTL:
		dst = appendBytes(dst, c.Key)
		dst = appendBytes(dst, c.Owner)
	case OpExtendAllOwned:
		dst = appendKeys(dst, c.Keys)
		dst = appendBytes(dst, c.Owner)
		dst = binary.AppendVarint(dst, int64(c.TTL))
	case OpAcquireAll, OpWaitAll:
		dst = binary.AppendUvarint(dst, uint64(len(c.Keys)))
		for _, k := range c.Keys {
			dst = appendBytes(dst, k)
		}
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = appendBytes(dst, c.Owner)
		dst = appendBool(dst, c.Shared)
		if c.Op == OpWaitAll {
			dst = binary.AppendVarint(dst, int64(c.Priority))
			dst = appendBytes(dst, c.Waiter)
			dst = binary.AppendVarint(dst, int64(c.Wait))
		}
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
	case OpEndSession:
		dst = appendBytes(dst, c.Client)
	case OpWait:
		dst = appendBytes(dst, c.Key)
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = appendBytes(dst, c.Owner)
		dst = appendBool(dst, c.Shared)
		dst = binary.AppendVarint(dst, int64(c.Priority))
		dst = appendBytes(dst, c.Waiter)
		dst = binary.AppendVarint(dst, int64(c.Wait))
	case OpCancelWait:
		dst = appendBytes(dst, c.Waiter)
	case OpSettings:
		dst = appendBytes(dst, c.Settings)
	case OpGrace:
		dst = binary.AppendVarint(dst, int64(c.TTL))
	default:
		panic(fmt.Sprintf("lockfsm: encoding unknown op %d", c.Op))
	}
	return dst
}

var (
	appendBytes = bin.AppendBytes
	appendBool  = bin.AppendBool
)

// appendKeys appends a list of keys.
func appendKeys(dst []byte, keys [][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, k := range keys {
		dst = appendBytes(dst, k)
	}
	return dst
}

// appendScope tells a nil scope (every lease) from an empty one; so too a
// nil owner (any) from an empty one.
func appendScope(dst, scope []byte) []byte {
	if scope == nil {
		return append(dst, 0)
	}
	return appendBytes(append(dst, 1), scope)
}

// DecodeEntry decodes a batch of commands, dropping its tag. The commands'
// byte slices alias entry.
func DecodeEntry(entry []byte) ([]Command, error) {
	_, cmds, err := DecodeTaggedEntry(entry)
	return cmds, err
}

// DecodeTaggedEntry decodes a batch of commands and its tag (a zero Tag
// when it has none). The tag's and the commands' byte slices alias entry.
func DecodeTaggedEntry(entry []byte) (Tag, []Command, error) {
	var tag Tag
	d := newDecoder(entry)
	switch v := d.Byte(); v {
	case entryVersion:
		if d.bool() {
			tag.Client, tag.Seq = d.Bytes(), d.Uvarint()
			if len(tag.Client) == 0 {
				d.Fail() // AppendTaggedEntry writes no tag for an empty client
			}
		}
	case entryVersionV1:
	default:
		return Tag{}, nil, fmt.Errorf("%w: version %d, want %d", ErrBadEntry, v, entryVersion)
	}
	n := d.Uvarint()
	if d.Err != nil || n > uint64(len(d.B)) { // each command takes a byte at least
		return Tag{}, nil, ErrBadEntry
	}
	cmds := make([]Command, n)
	for i := range cmds {
		d.command(&cmds[i])
	}
	if d.Err != nil {
		return Tag{}, nil, d.Err
	}
	if len(d.B) != 0 {
		return Tag{}, nil, fmt.Errorf("%w: %d bytes after the last command", ErrBadEntry, len(d.B))
	}
	return tag, cmds, nil
}

// decoder is bin's Decoder with lockfsm's readers: booleans strictly 0 or
// 1, a scope that tells nil from empty, a uint32.
type decoder struct{ bin.Decoder }

func newDecoder(b []byte) *decoder { return &decoder{bin.Decoder{B: b, Short: ErrBadEntry}} }

func (d *decoder) uint32() uint32 {
	v := d.Uvarint()
	if v > math.MaxUint32 {
		d.Fail()
	}
	return uint32(v)
}

func (d *decoder) bool() bool {
	switch d.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.Fail()
	return false
}

func (d *decoder) keys() [][]byte {
	n := d.Uvarint()
	if n > uint64(len(d.B)) { // each key takes a byte at least
		d.Fail()
		return nil
	}
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = d.Bytes()
	}
	return keys
}

func (d *decoder) scope() []byte {
	if !d.bool() {
		return nil
	}
	if b := d.Bytes(); b != nil {
		return b
	}
	return []byte{}
}

func (d *decoder) command(c *Command) {
	c.Op = Op(d.Byte())
	switch c.Op {
	case OpTerm:
		c.Term, c.Floor = d.Uvarint(), d.Uvarint()
	case OpCreate:
		c.Key = d.Bytes()
		c.Options.DefaultTTL = time.Duration(d.Varint())
		c.Options.LockDelay = time.Duration(d.Varint())
		c.Options.LockDelaySet = d.bool()
		c.Options.Limit = int(d.Varint())
	case OpAcquire:
		c.Key, c.TTL, c.Owner, c.Shared = d.Bytes(), time.Duration(d.Varint()), d.Bytes(), d.bool()
	case OpAcquireNew:
		c.Key, c.TTL, c.Owner = d.Bytes(), time.Duration(d.Varint()), d.Bytes()
	case OpAcquireAllNew:
		c.Keys = d.keys()
		c.TTL, c.Owner = time.Duration(d.Varint()), d.Bytes()
	case OpReleaseOwned:
		c.Key, c.Owner, c.Scope = d.Bytes(), d.scope(), d.scope()
	case OpExtendOwned:
		c.Key, c.Owner, c.Scope = d.Bytes(), d.scope(), d.scope()
		c.TTL, c.AddTTL = time.Duration(d.Varint()), d.bool()
	case OpOwnedTTL:
		c.Key, c.Owner = d.Bytes(), d.Bytes()
	case OpExtendAllOwned:
		c.Keys = d.keys()
		c.Owner, c.TTL = d.Bytes(), time.Duration(d.Varint())
	case OpAcquireAll, OpWaitAll:
		n := d.Uvarint()
		if n > uint64(len(d.B)) {
			d.Fail()
			return
		}
		c.Keys = make([][]byte, n)
		for i := range c.Keys {
			c.Keys[i] = d.Bytes()
		}
		c.TTL, c.Owner, c.Shared = time.Duration(d.Varint()), d.Bytes(), d.bool()
		if c.Op == OpWaitAll {
			c.Priority, c.Waiter, c.Wait = int(d.Varint()), d.Bytes(), time.Duration(d.Varint())
		}
	case OpRelease:
		c.Key, c.Token, c.Scope = d.Bytes(), d.Uvarint(), d.scope()
	case OpExtend:
		c.Key, c.Token, c.TTL, c.Scope = d.Bytes(), d.Uvarint(), time.Duration(d.Varint()), d.scope()
	case OpDelete:
		c.Key = d.Bytes()
	case OpForceRelease:
		c.Key, c.Token = d.Bytes(), d.Uvarint()
	case OpFire:
		c.Term = d.Uvarint()
		n := d.Uvarint()
		if n > uint64(len(d.B)) {
			d.Fail()
			return
		}
		c.Due = make([]locker.Due, n)
		for i := range c.Due {
			c.Due[i] = locker.Due{Kind: locker.DueKind(d.Byte()), Key: string(d.Bytes()), Token: d.Uvarint(), Renewals: d.uint32()}
		}
	case OpEndSession:
		c.Client = d.Bytes()
	case OpWait:
		c.Key, c.TTL, c.Owner, c.Shared = d.Bytes(), time.Duration(d.Varint()), d.Bytes(), d.bool()
		c.Priority, c.Waiter, c.Wait = int(d.Varint()), d.Bytes(), time.Duration(d.Varint())
	case OpCancelWait:
		c.Waiter = d.Bytes()
	case OpSettings:
		c.Settings = d.Bytes()
	case OpGrace:
		c.TTL = time.Duration(d.Varint())
	default:
		d.Fail()
	}
	if len(c.Owner) == 0 {
		c.Owner = nil // an empty OWNER is refused by the parser: nil is "none"
	}
}
