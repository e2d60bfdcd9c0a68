package outbox_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/outbox"
)

// A region's central serves its own page over its own store: the header and
// the KPI tiles name the region and its queue, and every list takes a
// region filter that keeps the region's rows (all of them) and refuses
// another region's, whose rows are in its own central's store.
func TestPageOfARegion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	eu := f.handlerWith(&signals{}, func(o *outbox.Options) { o.Region = contract.Region{Name: "eu", OwnQueue: true} })

	body := get(t, eu, "/").Body.String()
	require.Contains(t, body, "<title>Region eu · Outpost outbox</title>")
	require.Contains(t, body, `<h1>Outpost outbox · region eu</h1>`)
	require.Contains(t, body, `<h2 id="tiles-title">Region eu</h2>`)
	require.Contains(t, body, `id="tile-region"><span class="value">eu</span><span class="label">region, queue outpost-central-eu</span>`)
	require.Contains(t, body, `id="tile-queue"><span class="value">2</span>`, "the region's tiles count its store's rows")
	require.Contains(t, body, `<select name="region"`, "the filter form shows the region")

	for list, row := range map[string]string{"/": f.note, "/notifications": f.note, "/calls": f.call} {
		rec := get(t, eu, list+"?region=eu")
		require.Equal(t, http.StatusOK, rec.Code, list)
		require.Contains(t, rec.Body.String(), row, list)
		require.Contains(t, rec.Body.String(), `<option>eu</option></select>`, list)

		rec = get(t, eu, list+"?region=us")
		require.Equal(t, http.StatusBadRequest, rec.Code, list)
		require.Contains(t, rec.Body.String(), `region us: this page's central serves region "eu", and its store holds only that region's work: open region us's central's outbox page`, list)
		require.NotContains(t, rec.Body.String(), row, list)

		rec = get(t, eu, list+"?region=EU")
		require.Equal(t, http.StatusBadRequest, rec.Code, list)
		require.Contains(t, rec.Body.String(), `region "EU": want 1-63 lower-case letters`, list)
	}
	body = get(t, eu, "/notifications").Body.String()
	require.Contains(t, body, `<h1>Notifications · region eu</h1>`)
	body = get(t, eu, "/calls").Body.String()
	require.Contains(t, body, `<h1>Calls and writes · region eu</h1>`)

	// A region of its own namespace keeps outpost-central there.
	own := f.handlerWith(&signals{}, func(o *outbox.Options) { o.Region = contract.Region{Name: "us"} })
	require.Contains(t, get(t, own, "/").Body.String(), `<span class="label">region, queue outpost-central</span>`)
}

// Without a region the page is as before, and a region filter is refused:
// this central serves none.
func TestPageWithoutARegionRefusesARegionFilter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(&signals{})
	body := get(t, h, "/").Body.String()
	require.Contains(t, body, "<title>Outpost outbox</title>")
	require.NotContains(t, body, "tile-region")
	require.NotContains(t, body, `name="region"`)
	rec := get(t, h, "/calls?region=eu")
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Contains(t, rec.Body.String(), "region eu: this page's central serves no region")
}

// A page user limited to regions uses only the pages of centrals serving
// one of them: on another region's page they cannot sign in, and a session
// from their own region's page (centrals sharing session_key_env) is
// refused there, for reading and for retry alike, with nothing signalled.
func TestPageUserLimitedToRegions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	auth := outbox.Auth{SessionKey: key, Users: map[string]outbox.User{
		"ana": {PasswordHash: hash(t, "ana-pass"), Role: outbox.RoleOperator, Regions: []string{"eu"}},
		"uma": {PasswordHash: hash(t, "uma-pass"), Role: outbox.RoleOperator, Regions: []string{"us", "apac"}},
		"vic": {PasswordHash: hash(t, "vic-pass"), Role: outbox.RoleViewer},
	}}
	page := func(region string, tc *signals) *httptest.Server {
		srv := httptest.NewServer(f.handlerWith(tc, func(o *outbox.Options) {
			o.Auth, o.Region, o.Hosts = auth, contract.Region{Name: region, OwnQueue: true}, nil
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	euSignals := &signals{}
	eu, us := page("eu", euSignals), page("us", &signals{})
	retryURL := eu.URL + "/items/Notification/" + f.note + "/retry"
	refusal := `uma may use the outbox pages of regions "us", "apac" only, and this page's central serves region "eu": open the page of a region uma may use`

	code, body := signIn(t, newBrowser(t), eu.URL, "ana", "ana-pass")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `class="retry"`)
	code, body = signIn(t, newBrowser(t), eu.URL, "vic", "vic-pass")
	require.Equal(t, http.StatusOK, code, "a user of no region in particular uses every region's page")
	require.Contains(t, body, "Pump 3")

	uma := newBrowser(t)
	code, body = signIn(t, uma, eu.URL, "uma", "uma-pass")
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, html.UnescapeString(body), refusal)
	require.NotContains(t, body, "Pump 3")
	euURL, _ := url.Parse(eu.URL)
	require.Empty(t, uma.Jar.Cookies(euURL), "no session on a page she may not use")

	// Her session from us's page, carried to eu's.
	code, _ = signIn(t, uma, us.URL, "uma", "uma-pass")
	require.Equal(t, http.StatusOK, code)
	usURL, _ := url.Parse(us.URL)
	uma.Jar.SetCookies(euURL, uma.Jar.Cookies(usURL))
	code, body = getBody(t, uma, eu.URL+"/")
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, refusal)
	require.NotContains(t, body, "Pump 3")
	for _, target := range []string{retryURL, eu.URL + "/items/Notification/" + f.note + "/discard"} {
		resp, err := uma.PostForm(target, url.Values{"reason": {"mine now"}})
		require.NoError(t, err)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, target)
		require.Contains(t, readBody(t, resp), refusal, target)
	}
	require.Empty(t, euSignals.all(), "nothing is signalled for a user of another region")
}
