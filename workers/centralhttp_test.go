package workers

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/outpost-dev/outpost/internal/outbox"
)

// The outbox page answers to the host of central.listen and to
// central.page_hosts beside localhost and IP addresses, and to no other
// name.
func TestOutboxPageAnswersItsListenAndPageHosts(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("ana-pass"), bcrypt.MinCost)
	require.NoError(t, err)
	page, err := outboxPage(CentralOptions{
		Listen: "outpost-central.plant.example:8481", PageHosts: []string{"outbox.example"},
		PageAuth: outbox.Auth{Users: map[string]outbox.User{"ana": {PasswordHash: string(hash), Role: outbox.RoleOperator}}},
	}, nil, nil, nil, zap.NewNop())
	require.NoError(t, err)
	for host, want := range map[string]int{
		"outpost-central.plant.example:8481": http.StatusSeeOther, // to the sign-in form
		"outbox.example":                     http.StatusSeeOther,
		"127.0.0.1:8481":                     http.StatusSeeOther,
		"evil.example:8481":                  http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, "%s: %s", host, rec.Body.String())
	}
}

// Go's profiles are served on central.listen only when OUTPOST_PPROF=1
// asks for them, and only on a loopback address: they answer without the
// page's sign-in.
func TestPprofServedOnlyWhenAskedOnLoopback(t *testing.T) {
	heap := func(mux *http.ServeMux) int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil))
		return rec.Code
	}
	off := http.NewServeMux()
	require.NoError(t, servePprofIfAsked(off, "127.0.0.1:8481"))
	require.Equal(t, http.StatusNotFound, heap(off))

	t.Setenv(pprofEnv, "1")
	on := http.NewServeMux()
	require.NoError(t, servePprofIfAsked(on, "127.0.0.1:8481"))
	require.Equal(t, http.StatusOK, heap(on))

	err := servePprofIfAsked(http.NewServeMux(), "0.0.0.0:8481")
	require.ErrorContains(t, err, "reachable beyond this host")
}
