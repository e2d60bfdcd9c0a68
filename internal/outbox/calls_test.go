package outbox_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/outbox"
)

// getBody GETs url over HTTP and returns the status and body.
func getBody(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	require.NoError(t, err)
	return resp.StatusCode, readBody(t, resp)
}

// The calls list shows every call and write central mirrors, terminal ones
// too, newest first, in pages that follow on with an "Older" link, each
// linked to its item page; filters narrow it; bad ones are a 400. Served
// over HTTP, linked from the outbox.
func TestCallsListPagesEveryStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	statuses := []contract.Status{contract.StatusDelivered, contract.StatusFailed, contract.StatusDiscarded}
	var ids []string
	var rows []contract.TrackedOperation
	for i := range 60 {
		created := f.now.Add(-time.Duration(i) * time.Minute)
		row := contract.TrackedOperation{
			OperationID: uuid.NewString(), Kind: contract.KindExternalCall, Target: "mes.reportShift", Status: statuses[i%3],
			SourceSiteID: "plant-3", CreatedAt: created, UpdatedAt: created, TerminalAt: &created, Seq: int64(i + 1),
		}
		if i%4 == 0 {
			row.Kind, row.Target = contract.KindDatabaseWrite, "historian"
		}
		rows, ids = append(rows, row), append(ids, row.OperationID)
	}
	_, err := f.store.UpsertSiteCalls(ctx, rows)
	require.NoError(t, err)
	srv := httptest.NewServer(f.handlerWith(&noWorker{}, func(o *outbox.Options) { o.Hosts = nil }))
	t.Cleanup(srv.Close)
	client := srv.Client()

	code, body := getBody(t, client, srv.URL+"/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<a href="calls" id="all-calls">`)

	code, body = getBody(t, client, srv.URL+"/calls?site=plant-3")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="c-`+ids[0]+`"`, "the newest first")
	require.Contains(t, body, `href="items/DatabaseWrite/`+ids[0]+`"`, "linked to its page")
	require.Contains(t, body, `href="items/ExternalCall/`+ids[1]+`"`)
	require.Contains(t, body, `class="nw status-Failed">Failed<`)
	require.NotContains(t, body, ids[50], "50 to a page")
	next := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, next, "an Older link")
	code, body = getBody(t, client, srv.URL+"/"+html.UnescapeString(next[1]))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, ids[50])
	require.Contains(t, body, ids[59])
	require.NotContains(t, body, `id="c-`+ids[49]+`"`)
	require.NotContains(t, body, `id="next"`, "the last page")
	require.Contains(t, body, `name="site" value="plant-3"`, "the filter carries on")

	// The item page a call already has is its detail view.
	code, body = getBody(t, client, srv.URL+"/items/ExternalCall/"+ids[1])
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="status">Failed<`)

	for _, c := range []struct {
		query      string
		want, skip []string
	}{
		{"status=Failed&site=plant-3", []string{ids[1], ids[58]}, []string{ids[0], ids[2]}},
		{"status=Parked", []string{f.write}, []string{f.call, ids[0]}},
		{"kind=DatabaseWrite&site=plant-3", []string{ids[0], ids[4]}, []string{ids[1]}},
		{"target=historian&status=Discarded", []string{ids[8]}, []string{ids[0], ids[2]}},
		{"from=" + f.now.Add(-3*time.Minute).Format("2006-01-02T15:04") + "&to=" + f.now.Add(-time.Minute).Format("2006-01-02T15:04:05"),
			[]string{ids[2], ids[3]}, []string{ids[1], ids[4]}},
	} {
		code, body := getBody(t, client, srv.URL+"/calls?"+c.query)
		require.Equal(t, http.StatusOK, code, c.query)
		for _, id := range c.want {
			require.Contains(t, body, `id="c-`+id+`"`, c.query)
		}
		for _, id := range c.skip {
			require.NotContains(t, body, `id="c-`+id+`"`, c.query)
		}
	}
	code, body = getBody(t, client, srv.URL+"/calls?site=plant-9")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "No call or write matches.")

	for query, msg := range map[string]string{
		"status=Lost":      `status "Lost" is not one of`,
		"kind=Fax":         `kind "Fax" is not one of ExternalCall, DatabaseWrite`,
		"after=yesterday":  "page token",
		"from=last+monday": `from "last monday"`,
	} {
		code, body := getBody(t, client, srv.URL+"/calls?"+query)
		require.Equal(t, http.StatusBadRequest, code, query)
		require.Contains(t, body, msg, query)
	}
}

// With sign-in on, a viewer sees the calls list; a stranger is sent to
// sign in.
func TestCallsListNeedsAViewer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := httptest.NewServer(f.handlerWith(&signals{}, func(o *outbox.Options) {
		o.Auth, o.Hosts = users(t), nil
	}))
	t.Cleanup(srv.Close)

	anon := newBrowser(t)
	resp, err := anon.Get(srv.URL + "/calls")
	require.NoError(t, err)
	body := readBody(t, resp)
	require.Equal(t, "/login", resp.Request.URL.Path, "strangers sign in first")
	require.NotContains(t, body, f.call)

	viewer := newBrowser(t)
	code, _ := signIn(t, viewer, srv.URL, "vic", "vic-pass")
	require.Equal(t, http.StatusOK, code)
	code, body = getBody(t, viewer, srv.URL+"/calls")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="c-`+f.call+`"`)
	require.Contains(t, body, `id="c-`+f.write+`"`)
}
