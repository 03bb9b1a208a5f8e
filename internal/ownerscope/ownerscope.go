package ownerscope

import "strings"

// Sep ends a user's scope; user names cannot contain it (acl refuses
// them), so no scope is a prefix of another user's.
const Sep = 0x00

// Show decides what a client with scope sees of a lease with owner:
// with no scope (an admin), every lease, a scoped owner id as user:owner;
// with a scope, only its own leases, their owner ids as the client gave
// them; a made-up owner id shows as empty, as a lease taken without OWNER.
func Show(owner string, scope []byte) (string, bool) {
	if scope != nil {
		rest, ok := strings.CutPrefix(owner, string(scope))
		if !ok {
			return "", false
		}
		if strings.HasPrefix(rest, string(rune(Sep))) {
			return "", true
		}
		return rest, true
	}
	user, rest, scoped := strings.Cut(owner, string(rune(Sep)))
	if !scoped {
		return owner, true
	}
	if strings.HasPrefix(rest, string(rune(Sep))) {
		rest = ""
	}
	return user + ":" + rest, true
}
