// Package acl owns users and their permissions, in the shape of Redis's
// ACL: parsing the ACL file (one "user <name> <rules...>" line per user),
// the rules that make a user (passwords kept only as SHA-256 digests,
// key and channel patterns, command categories and commands), password
// checks in constant time, and the questions the server asks on each
// command: may this user run it, touch this key, listen on this channel.
// It does no network I/O; the server holds the current Store behind an
// atomic pointer and swaps it on reload.
package acl
