package outbox_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outpost-dev/outpost/internal/outbox"
)

// clock is a time the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Password guessing slows down: after a few wrong sign-ins for one user
// name, or from one address, each further attempt must wait longer (429
// with Retry-After, the password not even checked), whether or not the
// name exists; every failure and every refusal is logged and counted.
func TestSignInBacksOffAfterRepeatedFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	clk := &clock{t: f.now}
	core, logs := observer.New(zap.WarnLevel)
	registry := prometheus.NewRegistry()
	h := f.handlerWith(nil, func(o *outbox.Options) {
		o.Auth, o.Now, o.Log, o.Metrics = users(t), clk.now, zap.New(core), registry
	})
	signInFrom := func(addr, user, password string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"user": {user}, "password": {password}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr + ":40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	counted := func(outcome string) int {
		families, err := registry.Gather()
		require.NoError(t, err)
		for _, mf := range families {
			if mf.GetName() != "outpost_central_signins_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == outcome {
					return int(m.GetCounter().GetValue())
				}
			}
		}
		return 0
	}

	// Twelve wrong passwords in a row for ana from one address.
	var codes []int
	for range 12 {
		codes = append(codes, signInFrom("192.0.2.1", "ana", "guess").Code)
	}
	require.Equal(t, []int{401, 401, 401, 401, 401, 429, 429, 429, 429, 429, 429, 429}, codes)
	require.Equal(t, 5, counted("failed"))
	require.Equal(t, 7, counted("throttled"))
	require.Equal(t, 5, logs.FilterMessage("outbox sign-in failed").Len())
	require.Equal(t, 7, logs.FilterMessage("outbox sign-in throttled").Len())
	require.Equal(t, "ana", logs.FilterMessage("outbox sign-in throttled").All()[0].ContextMap()["user"])

	// The right password waits too, from any address: the name is throttled.
	rec := signInFrom("198.51.100.7", "ana", "ana-pass")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	retry, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, 1, retry, "the first wait is a second")
	// And the address is throttled for every name, known or not.
	require.Equal(t, http.StatusTooManyRequests, signInFrom("192.0.2.1", "vic", "vic-pass").Code)
	require.Equal(t, http.StatusTooManyRequests, signInFrom("192.0.2.1", "nobody", "x").Code)

	// Past the wait, one more wrong guess doubles it.
	clk.advance(time.Second)
	require.Equal(t, http.StatusUnauthorized, signInFrom("198.51.100.7", "ana", "guess").Code)
	rec = signInFrom("198.51.100.7", "ana", "ana-pass")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "2", rec.Header().Get("Retry-After"))
	clk.advance(2 * time.Second)
	require.Equal(t, http.StatusSeeOther, signInFrom("198.51.100.7", "ana", "ana-pass").Code, "the right password signs in after the wait")
	require.Equal(t, 1, counted("succeeded"))

	// An unknown name is throttled exactly like a known one, so the answer
	// tells nothing of which names exist.
	for i := range 6 {
		want := http.StatusUnauthorized
		if i == 5 {
			want = http.StatusTooManyRequests
		}
		require.Equal(t, want, signInFrom("203.0.113."+strconv.Itoa(i+1), "nobody", "guess").Code, "attempt %d", i+1)
	}
}
