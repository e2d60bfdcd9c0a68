package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/outbox"
)

// signals records what the page sends. Only SignalWorkflow is implemented:
// the page uses nothing else of the client, and the end-to-end test
// (internal/e2e/outbox_test.go) sends the same signals to a real server.
type signals struct {
	client.Client
	mu   sync.Mutex
	sent []signal
	err  error
}

type signal struct {
	workflowID, name string
	action           contract.OperatorAction
}

func (s *signals) SignalWorkflow(_ context.Context, workflowID, runID, name string, arg any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.sent = append(s.sent, signal{workflowID, name, arg.(contract.OperatorAction)})
	return nil
}

func (s *signals) all() []signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]signal(nil), s.sent...)
}

// fixture is a central store with a parked notification whose subject
// tries to inject markup, a stuck call and a parked write.
type fixture struct {
	store                  *centralstore.Store
	now                    time.Time
	note, call, write, new string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	store, err := centralstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "central.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	now := time.Now().UTC().Truncate(time.Second)
	f := fixture{store: store, now: now, note: uuid.NewString(), new: uuid.NewString()}

	for _, n := range []struct {
		id      string
		created time.Duration
		parked  bool
	}{{f.note, 3 * time.Hour, true}, {f.new, time.Minute, false}} {
		_, _, err = store.InsertNotification(ctx, centralstore.Notification{
			NotificationID: n.id, Type: contract.NotificationTypeEmail, ListName: "ops",
			Subject: `Pump 3 <script>alert("x")</script> tripped`, Body: "b", Status: contract.StatusPending,
			SourceSiteID: "plant-1", CreatedAt: now.Add(-n.created), SiteEnqueuedAt: now.Add(-n.created),
		})
		require.NoError(t, err)
		if n.parked {
			require.NoError(t, store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{
				NotificationID: n.id, Status: contract.StatusParked, RetryCount: 2, LastError: "retries exhausted (2): connection refused",
			}))
		}
	}
	call := contract.TrackedOperation{
		OperationID: uuid.NewString(), Kind: contract.KindExternalCall, Target: "erp.createOrder", Status: contract.StatusRetrying,
		RetryCount: 1, LastError: "HTTP 503", SourceSiteID: "plant-2", CreatedAt: now.Add(-time.Hour), UpdatedAt: now, Seq: 1,
	}
	write := call
	write.OperationID, write.Kind, write.Target, write.Status, write.Seq = uuid.NewString(), contract.KindDatabaseWrite, "historian", contract.StatusParked, 2
	_, err = store.UpsertSiteCalls(ctx, []contract.TrackedOperation{call, write})
	require.NoError(t, err)
	f.call, f.write = call.OperationID, write.OperationID
	return f
}

func (f fixture) handler(tc client.Client) http.Handler {
	return f.handlerWith(tc, func(*outbox.Options) {})
}

// handlerWith is the page with options changed by tweak.
func (f fixture) handlerWith(tc client.Client, tweak func(*outbox.Options)) http.Handler {
	opts := outbox.Options{
		TemporalUIURL: "http://ui.example:8233/", Namespace: "prod ns", StuckAge: 10 * time.Minute,
		Now:   func() time.Time { return f.now },
		Hosts: []string{"example.com"}, // httptest.NewRequest's Host
	}
	tweak(&opts)
	h, err := outbox.New(f.store, tc, opts)
	if err != nil {
		panic(err) // a fixture's options are valid; TestNewRefusesBadAuth covers the errors
	}
	return h
}

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec
}

func post(t *testing.T, h http.Handler, target string, form url.Values) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestPageShowsKPIsAndItems(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := get(t, f.handler(&signals{}), "/")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Header().Get("Content-Security-Policy"), "default-src 'none'")
	body := rec.Body.String()

	require.Contains(t, body, `id="tile-queue"><span class="value">2</span>`)
	require.Contains(t, body, `id="tile-stuck"><span class="value">1</span>`)
	require.Contains(t, body, `id="tile-parked"><span class="value">2</span>`)
	require.Contains(t, body, `id="tile-oldest"><span class="value">1h</span>`)
	// Escaped, never markup.
	require.NotContains(t, body, "<script>")
	require.Contains(t, body, "Pump 3 &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; tripped")
	// Workflow links: the id's slash and the namespace are path-escaped.
	require.Contains(t, body, `href="http://ui.example:8233/namespaces/prod%20ns/workflows/notification%2F`+f.note+`"`)
	require.Contains(t, body, `/workflows/call%2F`+f.call+`"`)
	// Buttons on parked items only; the fresh notification is not listed.
	require.Contains(t, body, `action="items/Notification/`+f.note+`/retry"`)
	require.Contains(t, body, `formaction="items/DatabaseWrite/`+f.write+`/discard"`)
	require.NotContains(t, body, "items/ExternalCall/"+f.call+"/retry")
	require.Contains(t, body, `class="details" href="items/ExternalCall/`+f.call+`"`)
	require.NotContains(t, body, f.new)

	// Filters narrow the list and come back in the form.
	body = get(t, f.handler(&signals{}), "/?status=Parked&kind=DatabaseWrite&q=hist").Body.String()
	require.Contains(t, body, f.write)
	require.NotContains(t, body, "item-"+f.note)
	require.Contains(t, body, `<option selected>DatabaseWrite</option>`)
	require.Contains(t, body, `name="q" value="hist"`)
	require.Contains(t, body, `name="back" value="kind=DatabaseWrite&amp;q=hist&amp;status=Parked"`)
	body = get(t, f.handler(&signals{}), "/?site=plant-1&from=2000-01-01T00:00&to=2000-01-02").Body.String()
	require.Contains(t, body, "Nothing stuck or parked matches.")
}

func TestPageRefusesBadFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(&signals{})
	for target, msg := range map[string]string{
		"/?status=Delivered":              `status "Delivered": want one of Stuck, Parked, Pending, Retrying`,
		"/?kind=Fax":                      `kind "Fax"`,
		"/?from=yesterday":                `from "yesterday": want a time`,
		"/?to=2026-13-01":                 `to "2026-13-01"`,
		"/?q=" + strings.Repeat("x", 300): "q: at most 256 characters",
	} {
		rec := get(t, h, target)
		require.Equal(t, http.StatusBadRequest, rec.Code, target)
		require.Contains(t, rec.Body.String(), msg, target)
	}
	require.Equal(t, http.StatusNotFound, get(t, h, "/nope").Code)
}

func TestActionValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tc := &signals{}
	h := f.handler(tc)
	for _, c := range []struct {
		target string
		form   url.Values
		code   int
		msg    string
	}{
		{"/items/Fax/" + f.note + "/retry", nil, http.StatusBadRequest, `kind "Fax": want one of Notification, ExternalCall, DatabaseWrite`},
		{"/items/notification/" + f.note + "/retry", nil, http.StatusBadRequest, `kind "notification"`},
		{"/items/Notification/not-a-uuid/retry", nil, http.StatusBadRequest, `id "not-a-uuid" is not a UUID`},
		{"/items/Notification/" + strings.ToUpper(f.note) + "/retry", nil, http.StatusBadRequest, "is not a UUID"},
		{"/items/Notification/%3Cb%3E/retry", nil, http.StatusBadRequest, `id "<b>" is not a UUID`},
		{"/items/Notification/" + f.note + "/purge", nil, http.StatusBadRequest, `action "purge": want retry or discard`},
		{"/items/Notification/" + f.note + "/retry", url.Values{"reason": {strings.Repeat("r", 1001)}}, http.StatusBadRequest, "reason: at most 1000"},
		{"/items/Notification/" + uuid.NewString() + "/retry", nil, http.StatusNotFound, "not found"},
		{"/items/ExternalCall/" + f.write + "/discard", nil, http.StatusNotFound, "it is a DatabaseWrite"},
		{"/items/DatabaseWrite/" + f.note + "/discard", nil, http.StatusNotFound, "not found"},
	} {
		rec := post(t, h, c.target, c.form)
		require.Equal(t, c.code, rec.Code, c.target)
		require.Contains(t, rec.Body.String(), c.msg, c.target)
		require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	}
	require.Empty(t, tc.all(), "nothing is signalled for bad input")
	require.Equal(t, http.StatusMethodNotAllowed, get(t, h, "/items/Notification/"+f.note+"/retry").Code)

	// A cross-site form post is refused before it reaches the handler.
	req := httptest.NewRequest(http.MethodPost, "/items/Notification/"+f.note+"/retry", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.Empty(t, tc.all())
}

func TestActionsSignalAndRedirect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tc := &signals{}
	srv := httptest.NewServer(f.handler(tc))
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}

	// The redirect keeps the filter and nothing else from "back".
	resp, err := browser.PostForm(srv.URL+"/items/Notification/"+f.note+"/retry", url.Values{
		"back": {"status=Parked&evil=1"}, "operator": {"  "}, "reason": {"relay fixed"},
	})
	require.NoError(t, err)
	body := readBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/?status=Parked", resp.Request.URL.RequestURI())
	require.Contains(t, body, "Sent retry to notification/"+f.note+" as outbox-page.")
	require.Equal(t, []signal{{contract.NotificationWorkflowID(f.note), contract.SignalRetry,
		contract.OperatorAction{Operator: outbox.DefaultOperator, Reason: "relay fixed"}}}, tc.all())
	// The message shows once.
	resp, err = browser.Get(srv.URL + "/")
	require.NoError(t, err)
	require.NotContains(t, readBody(t, resp), "Sent retry")

	// A name typed into the request is not who acted: an open page records
	// DefaultOperator.
	resp, err = browser.PostForm(srv.URL+"/items/DatabaseWrite/"+f.write+"/discard", url.Values{"operator": {"ana"}})
	require.NoError(t, err)
	require.Contains(t, readBody(t, resp), "Sent discard to call/"+f.write+" as outbox-page.")
	require.Equal(t, signal{contract.CachedCallWorkflowID(f.write), contract.SignalDiscard, contract.OperatorAction{Operator: outbox.DefaultOperator}}, tc.all()[1])

	// A failed signal comes back as an error message, not a success.
	tc.err = errors.New("workflow execution already completed")
	resp, err = browser.PostForm(srv.URL+"/items/Notification/"+f.note+"/discard", nil)
	require.NoError(t, err)
	body = readBody(t, resp)
	require.Contains(t, body, `class="flash err"`)
	require.Contains(t, body, "Could not send discard to notification/"+f.note+": workflow execution already completed")

	// A closed (terminated) workflow: the page says what happens next.
	tc.err = serviceerror.NewNotFound("workflow execution already completed")
	resp, err = browser.PostForm(srv.URL+"/items/Notification/"+f.note+"/discard", nil)
	require.NoError(t, err)
	body = readBody(t, resp)
	require.Contains(t, body, `class="flash err"`)
	require.Contains(t, body, "its workflow has closed (terminated?), so no signal reaches it. The site&#39;s next reconciliation settles it as Discarded")
}

// Mounted under a prefix, the redirect and the message follow the prefix.
func TestActionsUnderPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mux := http.NewServeMux()
	mux.Handle("/outbox/", http.StripPrefix("/outbox", f.handler(&signals{})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	resp, err := browser.PostForm(srv.URL+"/outbox/items/Notification/"+f.note+"/retry", nil)
	require.NoError(t, err)
	body := readBody(t, resp)
	require.Equal(t, "/outbox/", resp.Request.URL.Path)
	require.Contains(t, body, "Sent retry to notification/"+f.note)
	require.Contains(t, body, `action="items/Notification/`+f.note+`/retry"`)
}

// noWorker answers every status query the way Temporal does when no
// worker polls: with an error.
type noWorker struct{ signals }

func (*noWorker) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, errors.New("context deadline exceeded")
}

func TestItemPageShowsPayloadAndAuditTrail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, f.store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{
		NotificationID: f.note, Status: contract.StatusParked, RetryCount: 2, LastError: "retries exhausted (2): connection refused",
	}, centralstore.AuditEvent{
		EventID: contract.NotificationWorkflowID(f.note) + "/attempt/3", OperationID: f.note, Kind: contract.KindNotification, SiteID: "plant-1",
		Event: centralstore.AuditAttempt, Status: contract.StatusParked, Detail: "dial <smtp>: connection refused", At: f.now,
	}))
	h := f.handler(&noWorker{})

	rec := get(t, h, "/items/Notification/"+f.note)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	body := rec.Body.String()
	require.Contains(t, body, "<title>Notification "+f.note+" · Outpost outbox</title>")
	require.Contains(t, body, `<pre id="body">b</pre>`)
	require.Contains(t, body, "Pump 3 &lt;script&gt;", "escaped, never markup")
	require.NotContains(t, body, "<script>")
	require.Contains(t, body, "dial &lt;smtp&gt;: connection refused", "the audit trail")
	require.Contains(t, body, `id="status">Parked<`)
	require.Contains(t, body, `action="`+f.note+`/retry"`, "an open page lets anyone act")
	require.Contains(t, body, `name="return" value="item"`)
	require.Contains(t, body, `href="http://ui.example:8233/namespaces/prod%20ns/workflows/notification%2F`+f.note+`"`)

	// A call's request comes from its workflow: without a worker the page
	// says why it cannot show it.
	rec = get(t, h, "/items/DatabaseWrite/"+f.write)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "Not shown: status query of call/"+f.write+": context deadline exceeded")
	require.Contains(t, rec.Body.String(), "No audit events.")

	for target, want := range map[string]int{
		"/items/ExternalCall/" + f.write:       http.StatusNotFound, // a write, not a call
		"/items/Notification/" + f.call:        http.StatusNotFound,
		"/items/Notification/not-a-uuid":       http.StatusBadRequest,
		"/items/Fax/" + f.note:                 http.StatusBadRequest,
		"/items/Notification/{" + f.note + "}": http.StatusBadRequest,
	} {
		require.Equal(t, want, get(t, h, target).Code, target)
	}

	// Retry from the item's page comes back to it.
	rec = post(t, h, "/items/Notification/"+f.note+"/retry", url.Values{"return": {"item"}})
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	require.Equal(t, "/items/Notification/"+f.note, rec.Header().Get("Location"))
}

func TestFormatAge(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 45 * time.Second: "45s", 10 * time.Minute: "10m",
		12*time.Minute + 5*time.Second + 300*time.Millisecond: "12m5s", 150 * time.Minute: "2h30m",
		time.Hour: "1h", 76 * time.Hour: "3d4h",
	} {
		require.Equal(t, want, outbox.FormatAge(d), "%s", d)
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(data)
}

// The notifications list shows every notification, Delivered ones too,
// newest first, in pages that follow on with an "Older" link; filters
// narrow it; bad ones are a 400.
func TestNotificationsListPagesEveryStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var delivered []string
	for i := range 60 {
		id := uuid.NewString()
		_, _, err := f.store.InsertNotification(ctx, centralstore.Notification{
			NotificationID: id, Type: contract.NotificationTypeEmail, ListName: "shift", Subject: fmt.Sprintf("shift report %02d", i),
			Status: contract.StatusPending, SourceSiteID: "plant-3", CreatedAt: f.now.Add(-time.Duration(i) * time.Minute), SiteEnqueuedAt: f.now,
		})
		require.NoError(t, err)
		require.NoError(t, f.store.MarkNotificationDelivered(ctx, id, f.now, []string{"shift@example.com"}))
		delivered = append(delivered, id)
	}
	h := f.handler(&signals{})

	rec := get(t, h, "/notifications?site=plant-3")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	body := rec.Body.String()
	require.Contains(t, body, `id="n-`+delivered[0]+`"`, "the newest first")
	require.Contains(t, body, `href="items/Notification/`+delivered[0]+`"`)
	require.NotContains(t, body, delivered[50], "50 to a page")
	next := regexp.MustCompile(`id="next" href="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, next, "an Older link")
	rec = get(t, h, "/"+html.UnescapeString(next[1]))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), delivered[50])
	require.Contains(t, rec.Body.String(), delivered[59])
	require.NotContains(t, rec.Body.String(), `id="n-`+delivered[49]+`"`)
	require.NotContains(t, rec.Body.String(), `id="next"`, "the last page")

	body = get(t, h, "/notifications?status=Parked").Body.String()
	require.Contains(t, body, f.note)
	require.NotContains(t, body, delivered[0])
	body = get(t, h, "/notifications?q=report+07&site=plant-3").Body.String()
	require.Contains(t, body, delivered[7])
	require.NotContains(t, body, delivered[8])
	for target, msg := range map[string]string{
		"/notifications?status=Lost":      `status "Lost" is not one of`,
		"/notifications?after=yesterday":  "page token",
		"/notifications?from=last+monday": `from "last monday"`,
	} {
		rec := get(t, h, target)
		require.Equal(t, http.StatusBadRequest, rec.Code, target)
		require.Contains(t, rec.Body.String(), msg, target)
	}
}

// A call's page says when the site's changes lag an operator's action:
// after a discard, until the site's telemetry brings the discarded row (and
// any attempts before it), the trail is not complete and the page says so.
func TestItemPageSaysSiteChangesStillArrive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	h := f.handler(&noWorker{})
	page := "/items/DatabaseWrite/" + f.write
	require.NotContains(t, get(t, h, page).Body.String(), `id="site-lag"`, "nothing acted on yet")

	discarded := f.now.Add(time.Minute)
	_, err := f.store.InsertAuditEvents(ctx, []centralstore.AuditEvent{audit.OperatorAction(contract.OperatorActionAudit{
		OperationID: f.write, Kind: contract.KindDatabaseWrite, SiteID: "plant-2", Seq: 1, Status: contract.StatusDiscarded,
		Action: contract.OperatorAction{Operator: "ana", Reason: "entered by hand"}, At: discarded,
	})})
	require.NoError(t, err)
	body := get(t, h, page).Body.String()
	require.Contains(t, body, `id="site-lag"`)
	require.Contains(t, body, "Site changes still arriving")
	require.Contains(t, body, "OperatorDiscard by ana at "+discarded.Format("2006-01-02 15:04:05"))

	row, err := f.store.GetSiteCall(ctx, f.write)
	require.NoError(t, err)
	row.Status, row.Seq, row.UpdatedAt = contract.StatusDiscarded, row.Seq+1, discarded.Add(-time.Second) // the site's clock: before the audit's
	row.TerminalAt = &row.UpdatedAt
	_, err = f.store.UpsertSiteCalls(ctx, []contract.TrackedOperation{row}, audit.SiteCallEvents(row)...)
	require.NoError(t, err)
	body = get(t, h, page).Body.String()
	require.NotContains(t, body, `id="site-lag"`, "the site's discard arrived")
	require.Contains(t, body, `id="status">Discarded<`)
}
