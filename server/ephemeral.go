package server

import (
	"strconv"

	"github.com/leasehold/leasehold/protocol"
)

// maxEphemeral bounds the EPHEMERAL leases one connection keeps track of, so
// that a client cannot grow the server's memory without bound through them.
const maxEphemeral = 1 << 16

var errTooManyEphemeral = &protocol.Error{Code: protocol.CodeErr,
	Msg: "too many EPHEMERAL leases on this connection (" + strconv.Itoa(maxEphemeral) + "); release some first"}

// roomForEphemeral makes sure c can track one more EPHEMERAL lease, first
// forgetting leases that have ended on their own.
func (c *conn) roomForEphemeral() error {
	if len(c.ephemeral) < maxEphemeral {
		return nil
	}
	for key, token := range c.ephemeral {
		if !c.srv.table.Verify([]byte(key), token) {
			delete(c.ephemeral, key)
		}
	}
	if len(c.ephemeral) >= maxEphemeral {
		return errTooManyEphemeral
	}
	return nil
}

// holdEphemeral remembers a lease to release when c closes.
func (c *conn) holdEphemeral(key string, token uint64) {
	if c.ephemeral == nil {
		c.ephemeral = make(map[string]uint64)
	}
	c.ephemeral[key] = token
}

// releasedEphemeral forgets a lease c released itself.
func (c *conn) releasedEphemeral(key []byte, token uint64) {
	if t, ok := c.ephemeral[string(key)]; ok && t == token {
		delete(c.ephemeral, string(key))
	}
}

// releaseEphemeral ends every EPHEMERAL lease c still holds; it runs when
// the connection closes, however it closes. A lease that already ended, or
// passed to someone else, is left alone: RELEASE checks the token.
func (c *conn) releaseEphemeral() {
	for key, token := range c.ephemeral {
		c.srv.table.Release([]byte(key), token)
	}
	c.ephemeral = nil
}
