// Package cmdstats counts commands for INFO commandstats and latencystats
// and /metrics: per command, the calls, the failed and rejected ones and a
// latency histogram; per server, the bytes read and written on client
// sockets and the connections the idle timeout closed. It knows commands
// only by their index in protocol.Commands.
//
// Counting must put neither a lock nor contention on the command path, nor
// a locked instruction per command: an atomic add, or an atomic store (an
// XCHG on amd64), waits for the stores before it to drain, which costs a
// cheap command (a pipelined PING) tens of ns. So:
//   - dispatch records a command in its connection's Tally, plain
//     fields owned by whoever runs the connection's commands, which adds up
//     runs of the same command, outcome and latency bucket;
//   - the tally is added to a Block with atomic adds when the
//     round's replies are flushed (conn.flush), before they are written,
//     or when it is full: an add or two per distinct entry, so a round's
//     pipeline costs the adds one command does;
//   - each event loop has a block of its own and the goroutine transport's
//     connections share a few stripes, picked by connection id, so that
//     connections running at once seldom add to the same cache lines;
//   - readers sum every block.
//
// Bytes are added to the block per read or write system call, which costs
// far more than the add.
//
// Commands are counted by their index in protocol.Commands; a name not in
// the table counts under "unknown", never under the client's text, which
// would let a client create series without bound.
package cmdstats
