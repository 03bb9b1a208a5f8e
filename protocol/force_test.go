package protocol

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold/locker"
)

func TestParseForceRelease(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want ForceReleaseRequest
		err  error
	}{
		{"every lease", []string{"FORCE-RELEASE", "k"}, ForceReleaseRequest{Key: []byte("k"), Token: locker.AllLeases, All: true}, nil},
		{"one lease", []string{"force-release", "k", "42"}, ForceReleaseRequest{Key: []byte("k"), Token: 42}, nil},
		{"token 0 names no lease", []string{"FORCE-RELEASE", "k", "0"}, ForceReleaseRequest{Key: []byte("k")}, nil},
		{"bad token", []string{"FORCE-RELEASE", "k", "-1"}, ForceReleaseRequest{}, ErrBadToken},
		{"token with a leading zero", []string{"FORCE-RELEASE", "k", "042"}, ForceReleaseRequest{}, ErrBadToken},
		{"too many", []string{"FORCE-RELEASE", "k", "1", "2"}, ForceReleaseRequest{}, ArityError("force-release")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := make([][]byte, len(tt.args))
			for i, a := range tt.args {
				args[i] = []byte(a)
			}
			got, err := ParseForceRelease(args)
			if !errors.Is(err, tt.err) && (err == nil || tt.err == nil || err.Error() != tt.err.Error()) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if string(got.Key) != string(tt.want.Key) || got.Token != tt.want.Token || got.All != tt.want.All {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if c := Lookup([]byte("FORCE-RELEASE")); c == nil || c.CheckArity(1) == nil || c.CheckArity(2) != nil || c.CheckArity(3) != nil {
		t.Fatal("FORCE-RELEASE: lookup or arity wrong")
	}
	if c := Lookup([]byte("force-release")); c.Usage() != "FORCE-RELEASE key [token]" {
		t.Fatalf("usage %q", c.Usage())
	}
}
