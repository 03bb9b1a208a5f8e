//go:build !unix

package server

import "net"

// watchHangup cannot watch without reading here: a waiting connection's
// hang-up is noticed when its wait ends.
func watchHangup(net.Conn) (<-chan struct{}, func()) { return make(chan struct{}), func() {} }
