package lockfsm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/internal/bin"
	"github.com/leasehold/leasehold/locker"
)

// Results go from a leader back to the follower that forwarded their
// commands, and into snapshots with the sessions that recorded them. An
// error keeps its text and what it is (errors.Is) for every error the
// table returns, so that the follower answers its client exactly as the
// leader would have: protocol.Reply reads both.

// resultsVersion starts every encoding of results.
const resultsVersion = 1

// wireErrors are the errors a Result's Err may be or wrap, numbered by
// their place, since the number is what goes on the wire (0 is none of
// them): this package's own at the numbers ownWireErrors gives them, and
// every error of locker.Errors, in its order, at the numbers left. Nodes of
// different versions talk, so a number never moves: locker.Errors is append
// only, and an error of this package takes the next number when it is
// added. TestWireErrorNumbers pins every number.
var wireErrors = numberWireErrors(locker.Errors, ownWireErrors)

// ownWireErrors are this package's errors that results carry, by number.
var ownWireErrors = map[int]error{
	19: ErrBadEntry,
	20: ErrStaleRequest,
	21: ErrWaiterExists,
}

// numberWireErrors returns table's errors and own in one slice, each of own
// at its number and table's in order at the numbers left.
func numberWireErrors(table []error, own map[int]error) []error {
	errs := make([]error, 1, 1+len(table)+len(own))
	for len(errs) < cap(errs) {
		if err, ok := own[len(errs)]; ok {
			errs = append(errs, err)
			continue
		}
		if len(table) == 0 {
			panic(fmt.Sprintf("lockfsm: ownWireErrors skips number %d", len(errs)))
		}
		errs = append(errs, table[0])
		table = table[1:]
	}
	return errs
}

// How an error is encoded: its form, the number of the sentinel it is or
// wraps (wireErrors), its text, and for a KeyError its key.
const (
	errNone     = iota // no error
	errSentinel        // exactly one of wireErrors
	errKey             // a *locker.KeyError of one of wireErrors
	errWrapped         // an error that wraps one of wireErrors, with text of its own
	errOther           // none of them: its text alone
)

// wireError is an error that wrapped a sentinel, decoded: its text and the
// sentinel, so that errors.Is holds as it did for the original.
type wireError struct {
	text  string
	cause error
}

func (e *wireError) Error() string { return e.text }
func (e *wireError) Unwrap() error { return e.cause }

// sentinelOf returns the number of err's sentinel in wireErrors, or 0.
func sentinelOf(err error) int {
	for n, s := range wireErrors[1:] {
		if errors.Is(err, s) {
			return n + 1
		}
	}
	return 0
}

func appendError(dst []byte, err error) []byte {
	if err == nil {
		return append(dst, errNone)
	}
	code := sentinelOf(err)
	form, key := byte(errWrapped), ""
	switch ke, isKey := err.(*locker.KeyError); {
	case code == 0:
		form = errOther
	case err == wireErrors[code]:
		form = errSentinel
	case isKey && ke.Err == wireErrors[code]:
		form, key = errKey, ke.Key
	}
	dst = append(dst, form)
	dst = binary.AppendUvarint(dst, uint64(code))
	dst = bin.AppendBytes(dst, []byte(err.Error()))
	if form == errKey {
		dst = bin.AppendBytes(dst, []byte(key))
	}
	return dst
}

func (d *decoder) error() error {
	form := d.Byte()
	if form == errNone || d.Err != nil {
		return nil
	}
	code, text := d.Uvarint(), string(d.Bytes())
	var key []byte
	if form == errKey {
		key = d.Bytes()
	}
	if d.Err != nil || form > errOther {
		d.Fail()
		return nil
	}
	var sentinel error
	if code < uint64(len(wireErrors)) {
		sentinel = wireErrors[code]
	}
	switch {
	case sentinel == nil || form == errOther:
		// An error this node does not know (a newer node's, say): its
		// text is all there is.
		return errors.New(text)
	case form == errSentinel:
		return sentinel
	case form == errKey:
		return &locker.KeyError{Key: string(key), Err: sentinel}
	}
	return &wireError{text: text, cause: sentinel}
}

// Result flags.
const (
	resultGranted = 1 << iota
	resultQueued
	resultTokens // Tokens is not nil
)

// AppendResults appends the encoding of rs to dst, for a leader to answer
// the follower that forwarded their commands.
func AppendResults(dst []byte, rs []Result) []byte {
	dst = append(dst, resultsVersion)
	dst = binary.AppendUvarint(dst, uint64(len(rs)))
	for i := range rs {
		dst = appendResult(dst, &rs[i])
	}
	return dst
}

func appendResult(dst []byte, r *Result) []byte {
	var flags byte
	if r.Granted {
		flags |= resultGranted
	}
	if r.Queued {
		flags |= resultQueued
	}
	if r.Tokens != nil {
		flags |= resultTokens
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, r.Token)
	dst = binary.AppendVarint(dst, int64(r.N))
	if r.Tokens != nil {
		dst = binary.AppendUvarint(dst, uint64(len(r.Tokens)))
		for _, t := range r.Tokens {
			dst = binary.AppendUvarint(dst, t)
		}
	}
	return appendError(dst, r.Err)
}

// ErrBadResults is the error of results that do not decode.
var ErrBadResults = errors.New("lockfsm: malformed results")

// DecodeResults decodes what AppendResults encoded. An error that wrapped
// one of the table's errors (locker's, or this package's) decodes to one
// with the same text for which errors.Is holds as it did; a
// *locker.KeyError decodes to one; any other error to one with its text.
func DecodeResults(b []byte) ([]Result, error) {
	d := &decoder{bin.Decoder{B: b, Short: ErrBadResults}}
	if v := d.Byte(); v != resultsVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrBadResults, v, resultsVersion)
	}
	rs := d.results()
	if d.Err != nil {
		return nil, d.Err
	}
	if len(d.B) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last result", ErrBadResults, len(d.B))
	}
	return rs, nil
}

// results reads a count and as many results.
func (d *decoder) results() []Result {
	n := d.Uvarint()
	if n > uint64(len(d.B)) { // each result takes a byte at least
		d.Fail()
		return nil
	}
	rs := make([]Result, n)
	for i := range rs {
		d.result(&rs[i])
	}
	return rs
}

func (d *decoder) result(r *Result) {
	flags := d.Byte()
	if flags&^(resultGranted|resultQueued|resultTokens) != 0 {
		d.Fail()
		return
	}
	r.Granted, r.Queued = flags&resultGranted != 0, flags&resultQueued != 0
	r.Token, r.N = d.Uvarint(), int(d.Varint())
	if flags&resultTokens != 0 {
		n := d.Uvarint()
		if n > uint64(len(d.B)) {
			d.Fail()
			return
		}
		r.Tokens = make([]uint64, n)
		for i := range r.Tokens {
			r.Tokens[i] = d.Uvarint()
		}
	}
	r.Err = d.error()
}
