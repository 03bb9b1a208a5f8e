package protocol

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/locker"
)

// Lock events on the wire: the pub/sub channel of each lock, the message a
// subscriber receives, and the parse of a pmessage frame back into an
// event (for the server's status page, which listens as a subscriber does).

// EventChannelPrefix starts the pub/sub channel of every lock's events:
// __lock__:<key>, as Redis names keyspace channels __keyspace@0__:<key>.
const EventChannelPrefix = "__lock__:"

// EventMessage is an event's message: "<kind> <token>[ <owner>]", or the
// kind alone for a subscriber that may not see the lease's token and owner
// (visible false); owner is the owner id as that subscriber sees it.
func EventMessage(ev *locker.Event, owner string, visible bool) string {
	if !visible {
		return string(ev.Kind)
	}
	msg := string(ev.Kind) + " " + strconv.FormatUint(ev.Token, 10)
	if owner != "" {
		msg += " " + owner
	}
	return msg
}

// errEventFrame is ParseEventFrame's error for bytes that are not a frame.
var errEventFrame = errors.New("protocol: not an event frame")

// ParseEventFrame reads one ["pmessage", pattern, channel, message] frame,
// as the server sends a lock event to a pattern's subscriber, from the
// start of b, and returns the event and the bytes after the frame.
func ParseEventFrame(b []byte) (ev locker.Event, rest []byte, err error) {
	if !bytes.HasPrefix(b, []byte("*4\r\n")) {
		return ev, nil, errEventFrame
	}
	b = b[4:]
	var fields [4]string
	for n := range fields {
		if len(b) == 0 || b[0] != '$' {
			return ev, nil, errEventFrame
		}
		end := bytes.Index(b, []byte("\r\n"))
		if end < 0 {
			return ev, nil, errEventFrame
		}
		size, err := strconv.Atoi(string(b[1:end]))
		if err != nil || size < 0 || len(b) < end+2+size+2 {
			return ev, nil, errEventFrame
		}
		fields[n] = string(b[end+2 : end+2+size])
		b = b[end+2+size+2:]
	}
	kind, msg, _ := strings.Cut(fields[3], " ")
	token, owner, _ := strings.Cut(msg, " ")
	ev.Kind = locker.EventKind(kind)
	ev.Key = strings.TrimPrefix(fields[2], EventChannelPrefix)
	ev.Token, _ = strconv.ParseUint(token, 10, 64)
	ev.Owner = owner
	return ev, b, nil
}
