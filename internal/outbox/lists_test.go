package outbox_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/outbox"
)

// The lists page shows every list to viewers; an operator changes a list's
// targets, creates one and removes one, each change recorded as theirs; a
// bad definition is refused with the reason and writes nothing.
func TestListsPageChangesListsAsTheOperator(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, f.store.PutList(ctx, centralstore.List{Name: "ops", Type: contract.NotificationTypeEmail,
		Targets: []string{"ops@example.com"}, TypeData: "{}", UpdatedBy: "seed"}, "created"))
	srv := httptest.NewServer(f.handlerWith(nil, func(o *outbox.Options) { o.Auth = users(t) }))
	t.Cleanup(srv.Close)

	viewer := newBrowser(t)
	signIn(t, viewer, srv.URL, "vic", "vic-pass")
	resp, err := viewer.Get(srv.URL + "/lists")
	require.NoError(t, err)
	body := readBody(t, resp)
	require.Contains(t, body, "<title>Lists · Outpost outbox</title>")
	require.Contains(t, body, "ops@example.com")
	require.NotContains(t, body, `id="new-list"`, "a viewer gets no forms")
	resp, err = viewer.PostForm(srv.URL+"/lists", url.Values{"name": {"ops"}, "type": {"Email"}, "targets": {"mallory@example.com"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	operator := newBrowser(t)
	signIn(t, operator, srv.URL, "ana", "ana-pass")
	resp, err = operator.PostForm(srv.URL+"/lists", url.Values{"name": {"ops"}, "type": {"Email"}, "type_data": {"{}"},
		"targets": {"ops@example.com\r\nnight@example.com\r\n"}})
	require.NoError(t, err)
	body = readBody(t, resp)
	require.Equal(t, "/lists", resp.Request.URL.Path)
	require.Contains(t, body, "List ops: &#43;night@example.com. The next delivery attempt uses it.")
	l, err := f.store.GetList(ctx, "ops")
	require.NoError(t, err)
	require.Equal(t, []string{"ops@example.com", "night@example.com"}, l.Targets)
	require.Equal(t, "ana", l.UpdatedBy)

	resp, err = operator.PostForm(srv.URL+"/lists", url.Values{"name": {"ops"}, "type": {"Email"}, "targets": {"not an address"}})
	require.NoError(t, err)
	require.Contains(t, readBody(t, resp), "List ops not saved: invalid definition: list &#34;ops&#34;: target 1")
	l, err = f.store.GetList(ctx, "ops")
	require.NoError(t, err)
	require.Len(t, l.Targets, 2, "a refused change writes nothing")

	resp, err = operator.PostForm(srv.URL+"/lists", url.Values{"name": {"ops-teams"}, "type": {"Teams"},
		"targets": {"https://teams.example/hook"}, "type_data": {`{"style":"good"}`}})
	require.NoError(t, err)
	require.Contains(t, readBody(t, resp), "List ops-teams: created: type Teams")
	resp, err = operator.PostForm(srv.URL+"/lists/ops-teams/remove", nil)
	require.NoError(t, err)
	require.Contains(t, readBody(t, resp), "Removed list ops-teams")
	_, err = f.store.GetList(ctx, "ops-teams")
	require.ErrorIs(t, err, centralstore.ErrNotFound)

	events, err := f.store.ListAuditEvents(ctx, centralstore.ListOperationID("ops"))
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, "ana", events[1].Operator)
	require.WithinDuration(t, time.Now(), events[1].At, time.Minute)
}
