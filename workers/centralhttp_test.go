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
