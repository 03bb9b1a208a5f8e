// Package server glues the wire to the lock table: it accepts TCP
// connections, reads commands with protocol's bounded reader, dispatches them
// through the command table to handlers that parse (protocol), act (locker)
// and reply (protocol, through redcon's Writer), and enforces the connection
// limits. Each connection is served by one goroutine that the Server owns;
// Close stops accepting, closes every connection and waits for them.
package server
