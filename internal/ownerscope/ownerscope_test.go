package ownerscope

import "testing"

func TestShow(t *testing.T) {
	alice := []byte("alice\x00")
	anon := "alice\x00\x00" + "12345678" + "\x00\x00\x00\x00\x00\x00\x00\x01"
	tests := []struct {
		owner   string
		scope   []byte
		shown   string
		visible bool
	}{
		{"alice\x00job", alice, "job", true},
		{anon, alice, "", true},
		{"bob\x00job", alice, "", false},
		{"alice\x00job", []byte("al\x00"), "", false}, // a scope is not a prefix of a longer name's
		{"job", alice, "", false},                     // an owner of no user: an admin's, or from before users
		{"", alice, "", false},
		{"alice\x00job", nil, "alice:job", true},
		{anon, nil, "alice:", true},
		{"job", nil, "job", true},
		{"", nil, "", true},
	}
	for _, tt := range tests {
		shown, visible := Show(tt.owner, tt.scope)
		if shown != tt.shown || visible != tt.visible {
			t.Errorf("Show(%q, %q) = %q, %v; want %q, %v", tt.owner, tt.scope, shown, visible, tt.shown, tt.visible)
		}
	}
}
