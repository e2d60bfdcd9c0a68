package cli

import (
	"cmp"
	"runtime/debug"
	"strings"
)

// Set by dev/release with -ldflags -X, used only where build info has
// nothing: Go stamps no VCS information in a linked git worktree (its .git
// is a file; golang/go#58218). A plain go build or go install needs none.
var (
	stampedVersion string
	stampedCommit  string
	stampedDate    string
)

// buildStamp is what dev/release stamped.
type buildStamp struct{ version, commit, date string }

// Version names the build: its version (the tag for `go install
// …@v1.2.3`, a pseudo-version from the checkout for go build), the commit
// and its date when built from a checkout, and the Go release.
func Version() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(info, buildStamp{stampedVersion, stampedCommit, stampedDate})
}

// formatVersion prefers build info (nil: none) over the stamps, field by
// field.
func formatVersion(info *debug.BuildInfo, stamp buildStamp) string {
	var goVersion string
	var modified bool
	if info != nil {
		goVersion = info.GoVersion
		stamp = overStamp(stamp, info)
		modified = setting(info, "vcs.modified") == "true"
	}
	v := "outpost " + cmp.Or(stamp.version, "(devel)")
	var details []string
	if stamp.commit != "" {
		details = append(details, "commit "+stamp.commit)
	}
	if modified {
		details = append(details, "modified")
	}
	if stamp.date != "" {
		details = append(details, stamp.date)
	}
	if len(details) > 0 {
		v += " (" + strings.Join(details, ", ") + ")"
	}
	if goVersion != "" {
		v += ", " + goVersion
	}
	return v
}

// overStamp is stamp with what build info knows put over it: the module
// version (not "(devel)", a build without one), the commit and its date.
func overStamp(stamp buildStamp, info *debug.BuildInfo) buildStamp {
	if info.Main.Version != "" && info.Main.Version != "(devel)" {
		stamp.version = info.Main.Version
	}
	stamp.commit = cmp.Or(setting(info, "vcs.revision"), stamp.commit)
	stamp.date = cmp.Or(setting(info, "vcs.time"), stamp.date)
	return stamp
}

// setting is the build setting key, or "".
func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
