// Package outbox is the operator's outbox page, served by the central worker:
// KPI tiles, a per-site table, and the stuck and parked notifications and
// cached calls with a filter form, each linked to its own page (payload and
// audit trail) and to its workflow in the Temporal Web UI, parked ones with
// Retry and Discard buttons that send the same signals an operator sends
// from the Web UI or the temporal CLI.
//
// The page is server-rendered (html/template) and needs no JavaScript.
package outbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/httpserve"
)

// Options configures the page. Zero fields take the defaults below.
type Options struct {
	// TemporalUIURL is the Temporal Web UI each item links to.
	// Default http://127.0.0.1:8233 (config central.temporal_ui_url).
	TemporalUIURL string
	// Namespace holds Outpost's workflows. Default "default".
	Namespace string
	// StuckAge is how old a Pending or Retrying item must be to count as
	// stuck. Default 10m (config central.stuck_age).
	StuckAge time.Duration
	// Window is how far back the delivered KPI counts. Default 1h.
	Window time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Limit is the most items listed. Default 200.
	Limit int
	// Auth says who may see the page and who may act. Default: open.
	Auth Auth
	// Codec decodes payloads for the codec endpoints at /codec/decode and
	// /codec/encode; nil when payload encryption is off.
	Codec converter.PayloadCodec
	// CodecOrigins are the origins (scheme://host:port) of the Temporal
	// Web UI allowed to call the codec endpoints from a browser.
	CodecOrigins []string
	// Log receives failed and throttled sign-ins. Default: none.
	Log *zap.Logger
	// Metrics, when set, registers outpost_central_signins_total.
	Metrics prometheus.Registerer
	// Region is the one region this page's central serves (config
	// central.region and region_queue): the page names it, and its lists'
	// region filter takes it alone, since the central store holds only its
	// region's work. Default none.
	Region contract.Region
	// Hosts are the names, beside localhost and IP addresses, that
	// requests may carry in their Host header (config central.page_hosts
	// and the host of central.listen). Default none.
	Hosts []string
}

// DefaultOperator is recorded as the operator of a retry or discard sent
// from an open page (one that asks nobody to sign in).
const DefaultOperator = "outbox-page"

// Limits on the form fields an operator types.
const (
	maxOperatorChars = 128 // also the longest user name
	maxReasonChars   = 1000
	maxFilterChars   = 256
	maxFormBytes     = 16 << 10
)

const flashCookie = "outpost_outbox_flash"

type handler struct {
	store    *centralstore.Store
	tc       client.Client
	opts     Options
	auth     *authenticator
	throttle *signInThrottle
	signIns  *prometheus.CounterVec
	log      *zap.Logger
}

// New returns the outbox page: GET / renders it; GET /items/{kind}/{id}
// renders one item with its payload and audit trail; GET /notifications
// lists every notification, and GET /calls every cached call and database
// write, filtered and paged; GET /lists shows the
// notification lists and channels, POST /lists and /lists/{name}/remove
// change them; POST
// /items/{kind}/{id}/retry and /items/{kind}/{id}/discard signal a workflow
// and redirect back (303) with a message; GET and POST /login sign in, POST
// /logout signs out; /codec/ is the codec server. Mount it at a path ending
// in "/" (http.StripPrefix works). Cross-origin POSTs are refused, except to
// the codec server from opts.CodecOrigins, and so is every request whose
// Host is not a name of the page (onlyHosts).
func New(store *centralstore.Store, tc client.Client, opts Options) (http.Handler, error) {
	if opts.TemporalUIURL == "" {
		opts.TemporalUIURL = "http://127.0.0.1:8233"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.StuckAge <= 0 {
		opts.StuckAge = 10 * time.Minute
	}
	if opts.Window <= 0 {
		opts.Window = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Limit <= 0 {
		opts.Limit = 200
	}
	auth, err := newAuthenticator(opts.Auth, opts.Now)
	if err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	signIns, err := newSignInCounter(opts.Metrics)
	if err != nil {
		return nil, err
	}
	h := &handler{store: store, tc: tc, opts: opts, auth: auth, throttle: newSignInThrottle(opts.Now), signIns: signIns, log: opts.Log}
	page := http.NewServeMux()
	page.Handle("GET /{$}", h.require(RoleViewer, h.page))
	page.Handle("GET /items/{kind}/{id}", h.require(RoleViewer, h.item))
	page.Handle("GET /notifications", h.require(RoleViewer, h.notifications))
	page.Handle("GET /calls", h.require(RoleViewer, h.calls))
	page.Handle("POST /items/{kind}/{id}/{action}", h.require(RoleOperator, h.act))
	page.Handle("GET /lists", h.require(RoleViewer, h.lists))
	page.Handle("POST /lists", h.require(RoleOperator, h.setList))
	page.Handle("POST /lists/{name}/remove", h.require(RoleOperator, h.removeList))
	if len(opts.Auth.Users) > 0 {
		page.HandleFunc("GET /login", h.loginForm)
		page.HandleFunc("POST /login", h.login)
		page.HandleFunc("POST /logout", h.logout)
	}
	mux := http.NewServeMux()
	mux.Handle("/codec/", h.codecServer())
	mux.Handle("/", http.NewCrossOriginProtection().Handler(page))
	return onlyHosts(mux, opts.Hosts), nil
}

// onlyHosts refuses with 421 a request whose Host is not a name of the page
// (httpserve.HostAllowed). A DNS-rebinding page reaches the page on
// loopback under its own name and is then same-origin to the browser, so
// the cross-origin checks let it through: its Host header gives it away.
func onlyHosts(next http.Handler, hosts []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !httpserve.HostAllowed(r.Host, hosts) {
			http.Error(w, fmt.Sprintf("host %q is not a name of this page: use localhost or an IP address, "+
				"or add the name to central.page_hosts", r.Host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// filterKeys are the page's GET parameters, in form order.
var filterKeys = []string{"status", "kind", "site", "target", "from", "to", "q", "region"}

// statuses are the values of the status filter.
var statuses = []string{centralstore.ItemsStuck, string(contract.StatusParked), string(contract.StatusPending), string(contract.StatusRetrying)}

// badRequest is input the page refuses with 400 and its message.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return badRequest{fmt.Sprintf(format, args...)} }

// parseFilter reads the filter parameters of q.
func parseFilter(q url.Values) (centralstore.ItemFilter, error) {
	var f centralstore.ItemFilter
	for _, k := range filterKeys {
		if v := q.Get(k); utf8.RuneCountInString(v) > maxFilterChars || !utf8.ValidString(v) {
			return f, badf("%s: at most %d characters of UTF-8", k, maxFilterChars)
		}
	}
	f.Status, f.Kind = q.Get("status"), q.Get("kind")
	if f.Status != "" && !slices.Contains(statuses, f.Status) {
		return f, badf("status %q: want one of %s", f.Status, strings.Join(statuses, ", "))
	}
	if f.Kind != "" && !slices.Contains(contract.Kinds(), f.Kind) {
		return f, badf("kind %q: want one of %s", f.Kind, strings.Join(contract.Kinds(), ", "))
	}
	f.Site, f.Target, f.Query = strings.TrimSpace(q.Get("site")), strings.TrimSpace(q.Get("target")), strings.TrimSpace(q.Get("q"))
	var err error
	if f.CreatedFrom, err = ParseTime("from", q.Get("from")); err != nil {
		return f, err
	}
	if f.CreatedTo, err = ParseTime("to", q.Get("to")); err != nil {
		return f, err
	}
	return f, nil
}

// timeLayouts are accepted for from and to: the datetime-local input's
// value (read as UTC, the zone the page shows), RFC 3339, or a date.
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano, "2006-01-02"}

// ParseTime reads the time parameter name, UTC, in one of timeLayouts; zero
// for "". Its error starts with name.
func ParseTime(name, v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, badf("%s %q: want a time like 2026-01-31T14:05 (UTC) or 2026-01-31", name, v)
}

// filterQuery keeps only the filter parameters of q, so a redirect can
// carry the operator back to the list they acted from and nowhere else.
func filterQuery(q url.Values) string {
	out := url.Values{}
	for _, k := range filterKeys {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out.Encode()
}

func (h *handler) page(w http.ResponseWriter, r *http.Request, who identity) {
	filter, err := parseFilter(r.URL.Query())
	if err == nil {
		err = h.checkRegionFilter(r.URL.Query())
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := h.opts.Now().UTC()
	filter.Now, filter.StuckAge, filter.Limit = now, h.opts.StuckAge, h.opts.Limit
	report, err := h.store.KPIs(r.Context(), centralstore.KPIQuery{Now: now, StuckAge: h.opts.StuckAge, Window: h.opts.Window})
	if err != nil {
		http.Error(w, "central store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	items, err := h.store.ListOperatorItems(r.Context(), filter)
	if err != nil {
		http.Error(w, "central store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	data := h.pageData(w, r, who)
	data.Now, data.Report, data.Items = now, report, items
	data.Form, data.Back = formValues(r.URL.Query()), filterQuery(r.URL.Query())
	data.Statuses, data.Kinds = statuses, contract.Kinds()
	render(w, "outbox", data)
}

// checkRegionFilter refuses a list's region filter that names another
// region than the page's central serves. Central's rows carry no region: a
// central process serves one region and its store holds that region's
// work alone, so the filter keeps every row for its own region and can
// only send the operator to another region's page.
func (h *handler) checkRegionFilter(q url.Values) error {
	want := strings.TrimSpace(q.Get("region"))
	if want == "" || want == h.opts.Region.Name {
		return nil
	}
	if err := contract.CheckRegionName(want); err != nil {
		return badRequest{err.Error()}
	}
	return badf("region %s: this page's central serves %s, and its store holds only that region's work: open region %s's central's outbox page",
		want, contract.RegionWords(h.opts.Region.Name), want)
}

// pageData is what every page shows: the time, the pending message, who
// is signed in, and how to link to the Web UI.
func (h *handler) pageData(w http.ResponseWriter, r *http.Request, who identity) pageData {
	return pageData{
		Now: h.opts.Now().UTC(), StuckAge: h.opts.StuckAge, Window: h.opts.Window,
		Flash: readFlash(w, r), Who: who, Open: h.opts.Auth.Open(),
		Region: h.opts.Region, uiURL: strings.TrimRight(h.opts.TemporalUIURL, "/"), namespace: h.opts.Namespace,
	}
}

// formValues echoes the filter parameters into the form.
func formValues(q url.Values) map[string]string {
	m := make(map[string]string, len(filterKeys))
	for _, k := range filterKeys {
		m[k] = q.Get(k)
	}
	return m
}

// actions maps a URL action to its signal.
var actions = map[string]string{"retry": contract.SignalRetry, "discard": contract.SignalDiscard}

// act sends an operator's retry or discard. The operator recorded is the
// signed-in user, never a name typed into the form.
func (h *handler) act(w http.ResponseWriter, r *http.Request, who identity) {
	kind, id, action := r.PathValue("kind"), r.PathValue("id"), r.PathValue("action")
	signal, err := checkAction(kind, id, action)
	if err == nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		err = r.ParseForm()
		if err != nil {
			err = badf("read form: %v", err)
		}
	}
	var act contract.OperatorAction
	if err == nil {
		act, err = operatorAction(who.Name, r.PostForm)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := h.checkItem(r.Context(), kind, id); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, centralstore.ErrNotFound) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
		return
	}

	item := centralstore.OperatorItem{Kind: kind, ID: id}
	f := flash{OK: true, Message: fmt.Sprintf("Sent %s to %s as %s. A parked item acts on it; any other ignores it.", signal, item.WorkflowID(), act.Operator)}
	if h.tc == nil {
		f = flash{Message: "Not sent: the page has no Temporal client."}
	} else if err := h.tc.SignalWorkflow(r.Context(), item.WorkflowID(), "", signal, act); err != nil {
		f = flash{Message: fmt.Sprintf("Could not send %s to %s: %v", signal, item.WorkflowID(), err)}
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			// Its workflow has closed: terminated (or past retention).
			f.Message = fmt.Sprintf("Could not send %s to %s: its workflow has closed (terminated?), so no signal reaches it. "+
				"The site's next reconciliation settles it as Discarded; trigger Schedule reconcile/%s to do it now.",
				signal, item.WorkflowID(), item.Site)
		}
	}
	page := pagePath(r)
	setFlash(w, page, f)
	back := page
	if r.PostForm.Get("return") == "item" {
		back += "items/" + kind + "/" + id
	} else if q, err := url.ParseQuery(r.PostForm.Get("back")); err == nil {
		if enc := filterQuery(q); enc != "" {
			back += "?" + enc
		}
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// checkAction validates the path: a known kind, a canonical UUID, retry or
// discard. Returns the signal name.
func checkAction(kind, id, action string) (string, error) {
	if err := checkItemPath(kind, id); err != nil {
		return "", err
	}
	signal, ok := actions[action]
	if !ok {
		return "", badf("action %q: want retry or discard", action)
	}
	return signal, nil
}

// operatorAction is operator's action with the form's reason.
func operatorAction(operator string, form url.Values) (contract.OperatorAction, error) {
	a := contract.OperatorAction{Operator: operator, Reason: strings.TrimSpace(form.Get("reason"))}
	if !utf8.ValidString(a.Reason) || utf8.RuneCountInString(a.Reason) > maxReasonChars {
		return a, badf("reason: at most %d characters of UTF-8", maxReasonChars)
	}
	return a, nil
}

// checkItem makes sure central knows the item as that kind, so a button
// never signals a workflow the page did not list.
func (h *handler) checkItem(ctx context.Context, kind, id string) error {
	if kind == contract.KindNotification {
		_, err := h.store.GetNotification(ctx, id)
		return err
	}
	_, err := h.siteCall(ctx, kind, id)
	return err
}

// siteCall is central's copy of a call's tracking row, ErrNotFound when
// central knows none of that kind.
func (h *handler) siteCall(ctx context.Context, kind, id string) (contract.TrackedOperation, error) {
	row, err := h.store.GetSiteCall(ctx, id)
	if err != nil {
		return row, err
	}
	if row.Kind != kind {
		return row, fmt.Errorf("%s %s: %w (it is a %s)", kind, id, centralstore.ErrNotFound, row.Kind)
	}
	return row, nil
}

// pagePath is the path the page is served at, as the browser sees it: the
// request's original path without "items/{kind}/{id}/{action}", so the
// redirect and the flash cookie work behind http.StripPrefix too.
func pagePath(r *http.Request) string {
	orig := r.URL.Path
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && r.RequestURI != "" {
		orig = u.Path
	}
	if rest := strings.TrimPrefix(r.URL.Path, "/"); strings.HasSuffix(orig, rest) {
		return strings.TrimSuffix(orig, rest)
	}
	return "/"
}

// flash is the one-time message shown after an action.
type flash struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

func setFlash(w http.ResponseWriter, path string, f flash) {
	data, _ := json.Marshal(f)
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString(data), Path: path,
		MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
}

// readFlash returns the pending message, if any, and clears it.
func readFlash(w http.ResponseWriter, r *http.Request) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: pagePath(r), MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	data, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return nil
	}
	var f flash
	if json.Unmarshal(data, &f) != nil || f.Message == "" {
		return nil
	}
	return &f
}

// FormatAge renders an age for people in its two largest units, truncated:
// "45s", "12m5s", "2h30m", "3d4h", "10m".
func FormatAge(d time.Duration) string {
	units := []struct {
		size time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	for i, u := range units[:len(units)-1] {
		if d >= u.size {
			next := units[i+1]
			s := fmt.Sprintf("%d%s", d/u.size, u.name)
			if rest := d % u.size / next.size; rest > 0 {
				s += fmt.Sprintf("%d%s", rest, next.name)
			}
			return s
		}
	}
	return fmt.Sprintf("%ds", max(d, 0)/time.Second)
}
