package lockfsm

import (
	"encoding/binary"
	"fmt"
)

// A group entry carries several entries (each from AppendTaggedEntry,
// usually of different clients) in one log entry, so that the many small
// batches of clients that each wait for their answer cost Raft one entry,
// not one each: one encoding, one write and one apply call on every
// replica instead of dozens. Combiner builds them. Its members apply in
// order, each exactly as it would alone, tag and session included.
//
// The format: entryVersionGroup, the number of members (uvarint), then each
// member's length (uvarint) and bytes.
const entryVersionGroup = 3

// maxGroupMembers bounds the members of one group entry.
const maxGroupMembers = 1024

// AppendGroupEntry appends a group entry of members, each an encoded
// entry, to dst.
func AppendGroupEntry(dst []byte, members [][]byte) []byte {
	dst = append(dst, entryVersionGroup)
	dst = binary.AppendUvarint(dst, uint64(len(members)))
	for _, m := range members {
		dst = appendBytes(dst, m)
	}
	return dst
}

func isGroupEntry(entry []byte) bool { return len(entry) > 0 && entry[0] == entryVersionGroup }

// decodeGroupEntry returns the members of a group entry; they alias entry.
// A member is not decoded: a malformed one fails alone, when applied.
func decodeGroupEntry(entry []byte) ([][]byte, error) {
	d := newDecoder(entry[1:])
	n := d.Uvarint()
	if d.Err != nil || n > maxGroupMembers || n > uint64(len(d.B)) {
		return nil, ErrBadEntry
	}
	members := make([][]byte, n)
	for i := range members {
		members[i] = d.Bytes()
	}
	if d.Err != nil {
		return nil, d.Err
	}
	if len(d.B) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last member of a group", ErrBadEntry, len(d.B))
	}
	return members, nil
}
