package contract

import "regexp"

var siteNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// IsSiteName reports whether s is a valid site id or node name: 1-64
// letters, digits, '.', '_' or '-' (a task queue name, and central's
// 64-character columns). The config file's site.id and site.node and the
// SDK's Options.SiteID and Node follow it.
func IsSiteName(s string) bool { return siteNameRE.MatchString(s) }

// MaxBodyBytesLimit is the largest notification body a site may accept
// (site.max_body_bytes at most): a body of that size, even written as JSON
// escapes (6 bytes a character), keeps a notification's hand-off under
// Temporal's 2 MB payload limit.
const MaxBodyBytesLimit = 256 << 10
