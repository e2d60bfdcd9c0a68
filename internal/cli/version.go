package cli

import (
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
	version, commit, date, modified, goVersion := "", stamp.commit, stamp.date, false, ""
	if info != nil {
		goVersion = info.GoVersion
		if info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				date = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if version == "" {
		version = stamp.version
	}
	if version == "" {
		version = "(devel)"
	}
	v := "outpost " + version
	var details []string
	if commit != "" {
		details = append(details, "commit "+commit)
	}
	if modified {
		details = append(details, "modified")
	}
	if date != "" {
		details = append(details, date)
	}
	if len(details) > 0 {
		v += " (" + strings.Join(details, ", ") + ")"
	}
	if goVersion != "" {
		v += ", " + goVersion
	}
	return v
}
