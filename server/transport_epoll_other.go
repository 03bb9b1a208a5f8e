//go:build !linux

package server

import (
	"errors"
	"net"
	"time"
)

// defaultIOLoops is 0 where there is no epoll: a goroutine per connection.
const defaultIOLoops = 0

var errNoEventLoop = errors.New("server: event loops need Linux's epoll; use IOLoops 0")

type ioLoop struct{ done chan struct{} }

func newIOLoop(*Server) (*ioLoop, error)                { return nil, errNoEventLoop }
func (l *ioLoop) run()                                  {}
func (l *ioLoop) stop(time.Time)                        {}
func (l *ioLoop) post(func()) bool                      { return false }
func (l *ioLoop) register(*conn)                        {}
func (l *ioLoop) adopt(net.Conn) (*conn, error)         { return nil, errNoEventLoop }
func (l *ioLoop) closeUnregistered(*conn)               {}
func (l *ioLoop) armWaitTimer(*conn, *blockState)       {}
func (l *ioLoop) progressed(*conn, *blockState, uint64) {}
func (l *ioLoop) unblock(*conn, *blockState, bool)      {}
func (l *ioLoop) drainOutbox(*conn)                     {}
func (l *ioLoop) closeConn(*conn)                       {}
func (l *ioLoop) takeIdleTimeout()                      {}
