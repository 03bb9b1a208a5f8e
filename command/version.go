package command

import (
	"runtime/debug"
)

// buildVersion is the version --version prints and INFO reports: ldflags,
// the version the build set with -ldflags "-X main.version=...", when there
// is one; else what Go embedded in the binary (versionOf).
func buildVersion(ldflags string) string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(ldflags, info)
}

// versionOf picks the version: ldflags if set; else the main module's
// version, which go install pkg@v1.2.0 sets and which plain go build sets
// from the git checkout (v0.0.0-<time>-<revision>, +dirty with uncommitted
// changes); else, when the module version is "(devel)" but the build
// recorded the commit, its revision cut to 12 digits, -dirty if modified;
// else "dev" (a build outside a checkout, or with -buildvcs=false).
func versionOf(ldflags string, info *debug.BuildInfo) string {
	if ldflags != "" {
		return ldflags
	}
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
