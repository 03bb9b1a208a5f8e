package server

import (
	"net"
	"strconv"

	"github.com/leasehold/leasehold/internal/keyslot"
)

// Redis Cluster's routing, for clients that speak it (redis-cli -c,
// go-redis's ClusterClient): CLUSTER SLOTS and CLUSTER SHARDS describe one
// shard holding every slot, led by the Raft leader, and with --redirect a
// follower answers a command on a key with MOVED to the leader instead of
// forwarding it. During an election the answer is TRYAGAIN, never a MOVED
// toward a leader nobody knows (redis-cli would loop).

// announceAddr is the RESP address clients reach this node at.
func (s *Server) announceAddr() string {
	if s.cfg.AnnounceAddr != "" {
		return s.cfg.AnnounceAddr
	}
	if a := s.Addr(); a != nil {
		return a.String()
	}
	if a := s.TLSAddr(); a != nil {
		return a.String()
	}
	return ""
}

// writeSlots is CLUSTER SLOTS: every slot, on the leader.
func (c *conn) writeSlots() error {
	id, addr, err := c.srv.replica.LeaderRESP()
	if err != nil {
		return err
	}
	host, port := splitAddr(addr)
	c.wr.WriteArray(1)
	c.wr.WriteArray(3)
	c.wr.WriteInt(0)
	c.wr.WriteInt(keyslot.Slots - 1)
	c.wr.WriteArray(3)
	c.wr.WriteBulkString(host)
	c.wr.WriteInt(port)
	c.wr.WriteBulkString(id)
	return nil
}

// writeShards is CLUSTER SHARDS, Redis 7's shape: one shard, its slots and
// its one node, the leader.
func (c *conn) writeShards() error {
	id, addr, err := c.srv.replica.LeaderRESP()
	if err != nil {
		return err
	}
	host, port := splitAddr(addr)
	c.wr.WriteArray(1)
	c.wr.WriteArray(4)
	c.wr.WriteBulkString("slots")
	c.wr.WriteArray(2)
	c.wr.WriteInt(0)
	c.wr.WriteInt(keyslot.Slots - 1)
	c.wr.WriteBulkString("nodes")
	c.wr.WriteArray(1)
	c.wr.WriteArray(14)
	for _, kv := range [][2]string{{"id", id}, {"ip", host}, {"endpoint", host}, {"role", "master"}, {"health", "online"}} {
		c.wr.WriteBulkString(kv[0])
		c.wr.WriteBulkString(kv[1])
	}
	c.wr.WriteBulkString("port")
	c.wr.WriteInt(port)
	c.wr.WriteBulkString("replication-offset")
	c.wr.WriteInt64(int64(c.srv.replica.AppliedIndex()))
	return nil
}

// splitAddr splits HOST:PORT, a port it cannot read being 0.
func splitAddr(addr string) (host string, port int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ = strconv.Atoi(p)
	return h, port
}
