package sitedaemon

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/site"
)

// The site API's request decoding never panics and never buffers a body it
// refuses: whatever bytes arrive, the answer is 202 with an id, or a 4xx
// whose error says what was wrong. `go test` runs the seeds; `go test
// -fuzz FuzzPostNotification ./internal/sitedaemon` searches further.
func FuzzPostNotification(f *testing.F) {
	for _, seed := range []string{
		`{"list":"ops","subject":"Pump 3 tripped","body":"Pressure low"}`,
		`{"list":"ops","subject":"s","body":"\u00e9\u0000"}`,
		`{"list":"ops","subject":"a\nb"}`, `{"List":"ops","subject":"s"}`, `[]`, `null`, `{`, ``,
		`{"list":"ops","subject":"s"} {}`, `{"list":1e999,"subject":"s"}`, `{"list":"ops","subject":"s","instance":"` + strings.Repeat("x", 300) + `"}`,
		"{\"list\":\"ops\",\"subject\":\"Pump \xff\"}", `{"list":"ops","subject":"\udc00"}`, `{"list":"ops","subject":"\ud83d\ude00","body":"\ud83d"}`,
		`{"list":"ops","subject":"s","list":"all"}`, `{"list":"ops","subject":"s","s\u0075bject":"t"}`, `{"list":"ops","subject":"a\u0000b"}`,
		`{"list":"ops","subject":"s","body":"\u"}`, `{"list":"ops","subject":"s","body":"\ud800\u"}`,
	} {
		f.Add(seed)
	}
	c, err := site.Open(f.Context(), f.TempDir()+"/site.db", site.Options{SiteID: "plant-1", Node: "node-a", MaxBodyBytes: 1024})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { c.Close() })
	h := NewAPI(c, APIOptions{}, zap.NewNop())
	f.Fuzz(func(t *testing.T, body string) {
		before, err := c.BufferDepth(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, apiRequest(http.MethodPost, "/v1/notifications", body))
		after, err := c.BufferDepth(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rec.Code == http.StatusAccepted:
			var acc Accepted
			if err := json.Unmarshal(rec.Body.Bytes(), &acc); err != nil || acc.ID == "" || after != before+1 {
				t.Fatalf("202 without a buffered id: %s (depth %d → %d)", rec.Body, before, after)
			}
			if !utf8.ValidString(body) {
				t.Fatalf("202 for a request that is not valid UTF-8: its text was changed as it was stored")
			}
		case rec.Code >= 400 && rec.Code < 500:
			var e ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || after != before {
				t.Fatalf("%d without a reason, or with something buffered: %s (depth %d → %d)", rec.Code, rec.Body, before, after)
			}
		default:
			t.Fatalf("unexpected %d: %s", rec.Code, rec.Body)
		}
	})
}
