package outbox

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// notificationsData is what the notifications list renders.
type notificationsData struct {
	pageData
	Page centralstore.NotificationPage
	// Form echoes the filter; Next links the next page (the same filter,
	// after this page's last row), empty on the last page.
	Form     map[string]string
	Next     template.URL
	Statuses []contract.Status
}

// notificationKeys are the notification list's GET parameters.
var notificationKeys = []string{"status", "type", "site", "list", "from", "to", "q", "stuck", "region", "after"}

// notifications lists every notification (Delivered and Discarded too),
// newest first, a page at a time, with filters.
func (h *handler) notifications(w http.ResponseWriter, r *http.Request, who identity) {
	q := r.URL.Query()
	filter, err := parseNotificationFilter(q)
	if err == nil {
		err = h.checkRegionFilter(q)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	data := notificationsData{pageData: h.pageData(w, r, who), Statuses: contract.CentralStatuses()}
	filter.Now, filter.StuckAge = data.Now, h.opts.StuckAge
	data.Page, err = h.store.ListNotifications(r.Context(), filter)
	if listFailed(w, err) {
		return
	}
	data.Form, data.Next = echoFilter(q, notificationKeys, "notifications", data.Page.NextToken)
	render(w, "notifications", data)
}

// parseNotificationFilter reads the list's parameters.
func parseNotificationFilter(q url.Values) (centralstore.NotificationFilter, error) {
	var f centralstore.NotificationFilter
	for _, k := range notificationKeys {
		if v := q.Get(k); utf8.RuneCountInString(v) > maxFilterChars || !utf8.ValidString(v) {
			return f, badf("%s: at most %d characters of UTF-8", k, maxFilterChars)
		}
	}
	f.Status = contract.Status(q.Get("status")) // the store refuses an unknown one
	f.Type, f.Site, f.List = strings.TrimSpace(q.Get("type")), strings.TrimSpace(q.Get("site")), strings.TrimSpace(q.Get("list"))
	f.Query, f.StuckOnly = strings.TrimSpace(q.Get("q")), q.Get("stuck") != ""
	var err error
	f.CreatedFrom, f.CreatedTo, f.After, err = pageWindow(q)
	return f, err
}

// pageWindow reads the time range and cursor both paged lists take (from,
// to, after); its errors name the parameter.
func pageWindow(q url.Values) (from, to time.Time, after *centralstore.Cursor, err error) {
	if from, err = ParseTime("from", q.Get("from")); err != nil {
		return from, to, nil, err
	}
	if to, err = ParseTime("to", q.Get("to")); err != nil {
		return from, to, nil, err
	}
	if a := q.Get("after"); a != "" {
		c, err := centralstore.ParseCursor(a)
		if err != nil {
			return from, to, nil, badf("after: %v", err)
		}
		after = &c
	}
	return from, to, after, nil
}

const notificationsHTML = `{{template "head" (.TitleFor "Notifications · ")}}
<body>
<p><a href="./" id="back">← Outbox</a></p>
<h1>Notifications{{with .Region.Name}} · region {{.}}{{end}}</h1>
<p class="sub">Every notification central has, newest first, whatever its status. At {{utc .Now}}.</p>
<form class="filter" method="get" action="">
  <label>Status<select name="status"><option value="">any</option>{{range .Statuses}}<option{{if eq (print .) (index $.Form "status")}} selected{{end}}>{{.}}</option>{{end}}</select></label>
  <label>Type<input name="type" value="{{index .Form "type"}}" size="8"></label>
  <label>Site<input name="site" value="{{index .Form "site"}}" size="10"></label>
  <label>List<input name="list" value="{{index .Form "list"}}" size="10"></label>
  <label>Created from (UTC)<input type="datetime-local" name="from" value="{{index .Form "from"}}"></label>
  <label>to (UTC)<input type="datetime-local" name="to" value="{{index .Form "to"}}"></label>
  <label>Subject contains<input type="search" name="q" value="{{index .Form "q"}}" size="16"></label>
  <label>Stuck only<input type="checkbox" name="stuck" value="1"{{if index .Form "stuck"}} checked{{end}}></label>
  {{template "regionFilter" .}}
  <button type="submit">Filter</button> <a href="notifications">Clear</a>
</form>
<table id="notifications">
<thead><tr><th>Created (UTC)</th><th>Status</th><th>Site</th><th>List</th><th>Subject</th><th>Retries</th><th>Last error</th></tr></thead>
<tbody>
{{range .Page.Notifications}}
<tr id="n-{{.NotificationID}}">
  <td class="nw">{{utc .CreatedAt}}</td><td class="nw status-{{.Status}}">{{.Status}}</td><td class="nw">{{.SourceSiteID}}</td><td>{{.ListName}}</td>
  <td><a href="items/Notification/{{.NotificationID}}">{{.Subject}}</a></td><td class="n">{{.RetryCount}}</td><td class="err-text">{{.LastError}}</td>
</tr>
{{else}}<tr><td colspan="7" class="muted">No notification matches.</td></tr>
{{end}}
</tbody>
</table>
{{with .Next}}<p><a id="next" href="{{.}}">Older →</a></p>{{end}}
</body>
</html>
`
