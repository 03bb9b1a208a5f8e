// Package ownerscope owns the encoding of owner ids in a user's scope (the
// user's name and a NUL byte before the owner id a client gave, or before
// a made-up one) and what each viewer is shown of one: the server's
// ownership.go says why users work in scopes.
package ownerscope
