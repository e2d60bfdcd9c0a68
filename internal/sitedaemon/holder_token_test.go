package sitedaemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/site"
)

// Each operation records the holder of the token it came with: in a
// notification's submission to central, and in a call's tracking row and
// the telemetry change central audits. A body cannot name a holder.
func TestTokenHolderIsRecordedWithEachOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := siteDefinitions("http://127.0.0.1:1", filepath.Join(dir, "historian.db"))
	store, err := sitestore.Open(ctx, filepath.Join(dir, "site.db"), sitestore.Options{})
	require.NoError(t, err)
	reg := targets.New(cfg.ExternalSystems, cfg.Databases)
	c := site.New(store, reg, targetexec.New(reg), site.Options{SiteID: "plant-1", Node: "node-a"})
	t.Cleanup(func() { c.Close() })
	h := NewAPI(c, APIOptions{Tokens: map[string]string{"scada": "tok-scada", "scripts": "tok-scripts"}}, zaptest.NewLogger(t))
	send := func(path, body, token string) (int, string) {
		r := apiRequest(http.MethodPost, path, body)
		r.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var res struct{ ID, Error string }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res), rec.Body.String())
		if res.ID != "" {
			return rec.Code, res.ID
		}
		return rec.Code, res.Error
	}

	code, id := send("/v1/notifications", `{"list":"ops","subject":"Pump 3 tripped"}`, "tok-scada")
	require.Equal(t, http.StatusAccepted, code, id)
	msg, err := store.Get(ctx, id)
	require.NoError(t, err)
	var sub contract.NotificationSubmission
	require.NoError(t, json.Unmarshal(msg.Payload, &sub))
	require.Equal(t, "scada", sub.SubmittedBy)

	code, id = send("/v1/calls", `{"system":"erp","method":"getOrder","params":{"id":"42"}}`, "tok-scripts")
	require.Equal(t, http.StatusAccepted, code, id) // erp is unreachable: queued
	row, err := store.GetOperation(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "scripts", row.SubmittedBy)
	changes, err := store.TelemetryChanges(ctx, 0, 10)
	require.NoError(t, err)
	require.NotEmpty(t, changes)
	for _, ch := range changes {
		require.Equal(t, "scripts", ch.SubmittedBy, "change %d", ch.Seq)
	}

	code, msgText := send("/v1/notifications", `{"list":"ops","subject":"s","submittedBy":"someone-else"}`, "tok-scada")
	require.Equal(t, http.StatusBadRequest, code)
	require.True(t, strings.Contains(msgText, "submittedBy"), msgText)
}
