// Package server glues the wire to the lock table: it accepts TCP
// connections, reads commands with protocol's bounded reader, dispatches them
// through the command table to handlers that parse (protocol), act (locker)
// and reply (protocol, through redcon's Writer), commits what they changed
// (persist) before their replies leave, and enforces the connection limits.
//
// Connections are served by epoll event loops (Config.IOLoops, 1 by default
// on Linux): each loop is one goroutine that owns many connections, reads a
// socket only when epoll says it is readable and writes the replies of a
// round at once. With IOLoops 0, and on systems without epoll, each
// connection is served by a goroutine of its own with blocking reads. Either
// way the Server owns those goroutines: Close stops accepting, closes every
// connection and waits for them. docs/design.md follows one request through.
package server
