// Package clusterinfo owns the text of CLUSTER INFO and CLUSTER NODES, in
// Redis's shapes, from what the replica reports of this node's Raft group.
package clusterinfo
