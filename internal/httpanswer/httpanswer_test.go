package httpanswer

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// One rule for every HTTP answer Outpost gets, a cached call's and a Teams
// or webhook delivery's: 2xx delivered; 408, 429 and 5xx worth retrying;
// anything else refused for good.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		code          int
		ok, permanent bool
	}{
		{200, true, false}, {201, true, false}, {204, true, false}, {299, true, false},
		{100, false, true}, {101, false, true}, {301, false, true}, {304, false, true},
		{400, false, true}, {401, false, true}, {403, false, true}, {404, false, true}, {410, false, true}, {422, false, true},
		{408, false, false}, {429, false, false},
		{500, false, false}, {502, false, false}, {503, false, false}, {504, false, false}, {599, false, false},
		{600, false, true},
	} {
		ok, permanent := Classify(tt.code)
		require.Equal(t, tt.ok, ok, tt.code)
		require.Equal(t, tt.permanent, permanent, tt.code)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":            0,
		"30":          30 * time.Second,
		" 30 ":        30 * time.Second,
		"0":           0,
		"-5":          0,
		"soon":        0,
		"99999999999": 24 * time.Hour,
		now.Add(2 * time.Minute).Format(http.TimeFormat):  2 * time.Minute,
		now.Add(-2 * time.Minute).Format(http.TimeFormat): 0,
	} {
		require.Equal(t, want, RetryAfter(v, now), "%q", v)
	}
}
