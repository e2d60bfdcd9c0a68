// Package httpanswer is the one classifier of an HTTP answer to Outpost:
// a cached call's (internal/targetexec) and a Teams or webhook delivery's
// (internal/delivery). Each wraps the verdict in its failure and caps the
// wait by its own rules.
package httpanswer

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Classify says whether code is a success and, if not, whether retrying
// cannot help: 2xx succeed; 408, 429 and 5xx are worth retrying (the
// receiver was busy, down or slow); any other code is refused for good.
func Classify(code int) (ok, permanent bool) {
	switch {
	case code >= 200 && code < 300:
		return true, false
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500 && code < 600:
		return false, false
	}
	return false, true
}

// maxRetryAfter caps a Retry-After read here; each caller may cap it lower.
const maxRetryAfter = 24 * time.Hour

// RetryAfter reads a Retry-After header's value, seconds or an HTTP date,
// as the wait from now, at most a day; 0 when absent, unreadable or past.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs > 0 {
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return min(at.Sub(now), maxRetryAfter)
	}
	return 0
}
