// Package outbuf owns the buffer of a connection's unsent output on an
// event loop: blocks kept in order, so that neither appending nor a partial
// write moves what waits.
package outbuf
