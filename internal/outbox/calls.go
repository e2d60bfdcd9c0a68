package outbox

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// callsData is what the calls list renders.
type callsData struct {
	pageData
	Page centralstore.CallPage
	// Form echoes the filter; Next links the next page (the same filter,
	// after this page's last row), empty on the last page.
	Form     map[string]string
	Next     template.URL
	Statuses []contract.Status
	Kinds    []string
}

// callKeys are the calls list's GET parameters.
var callKeys = []string{"status", "kind", "site", "target", "from", "to", "region", "after"}

// calls lists every cached call and database write central mirrors
// (Delivered, Failed and Discarded too), newest first, a page at a time,
// with filters; each links to its item page.
func (h *handler) calls(w http.ResponseWriter, r *http.Request, who identity) {
	q := r.URL.Query()
	filter, err := parseCallFilter(q)
	if err == nil {
		err = h.checkRegionFilter(q)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	data := callsData{pageData: h.pageData(w, r, who), Statuses: contract.CentralStatuses(), Kinds: contract.CallKinds()}
	data.Page, err = h.store.ListCalls(r.Context(), filter)
	if listFailed(w, err) {
		return
	}
	data.Form, data.Next = echoFilter(q, callKeys, "calls", data.Page.NextToken)
	render(w, "calls", data)
}

// listFailed answers a list's store error, if any: 400 for a filter the
// store refuses, 500 otherwise.
func listFailed(w http.ResponseWriter, err error) bool {
	switch {
	case errors.Is(err, centralstore.ErrInvalidFilter):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case err != nil:
		http.Error(w, "central store: "+err.Error(), http.StatusInternalServerError)
	}
	return err != nil
}

// echoFilter is the filter parameters keys of q for the form, and the link
// to the page after token with the same filter ("" when token is "").
func echoFilter(q url.Values, keys []string, path, token string) (map[string]string, template.URL) {
	form := map[string]string{}
	next := url.Values{}
	for _, k := range keys {
		form[k] = q.Get(k)
		if v := q.Get(k); v != "" && k != "after" {
			next.Set(k, v)
		}
	}
	if token == "" {
		return form, ""
	}
	next.Set("after", token)
	return form, template.URL(path + "?" + next.Encode()) // only encoded values: safe as a URL
}

// parseCallFilter reads the list's parameters; the store refuses an
// unknown status or kind.
func parseCallFilter(q url.Values) (centralstore.CallFilter, error) {
	var f centralstore.CallFilter
	for _, k := range callKeys {
		if v := q.Get(k); utf8.RuneCountInString(v) > maxFilterChars || !utf8.ValidString(v) {
			return f, badf("%s: at most %d characters of UTF-8", k, maxFilterChars)
		}
	}
	f.Status, f.Kind = contract.Status(q.Get("status")), q.Get("kind")
	f.Site, f.Target = strings.TrimSpace(q.Get("site")), strings.TrimSpace(q.Get("target"))
	var err error
	f.CreatedFrom, f.CreatedTo, f.After, err = pageWindow(q)
	return f, err
}

const callsHTML = `{{template "head" (.TitleFor "Calls and writes · ")}}
<body>
<p><a href="./" id="back">← Outbox</a></p>
<h1>Calls and writes{{with .Region.Name}} · region {{.}}{{end}}</h1>
<p class="sub">Every cached call and database write central mirrors from the sites, newest first, whatever its status. At {{utc .Now}}.</p>
<form class="filter" method="get" action="">
  <label>Status<select name="status"><option value="">any</option>{{range .Statuses}}<option{{if eq (print .) (index $.Form "status")}} selected{{end}}>{{.}}</option>{{end}}</select></label>
  <label>Kind<select name="kind"><option value="">any</option>{{range .Kinds}}<option{{if eq . (index $.Form "kind")}} selected{{end}}>{{.}}</option>{{end}}</select></label>
  <label>Site<input name="site" value="{{index .Form "site"}}" size="10"></label>
  <label>Target<input name="target" value="{{index .Form "target"}}" size="16"></label>
  {{template "regionFilter" .}}
  <label>Created from (UTC)<input type="datetime-local" name="from" value="{{index .Form "from"}}"></label>
  <label>to (UTC)<input type="datetime-local" name="to" value="{{index .Form "to"}}"></label>
  <button type="submit">Filter</button> <a href="calls">Clear</a>
</form>
<table id="calls">
<thead><tr><th>Created (UTC)</th><th>Status</th><th>Kind</th><th>Site</th><th>Target</th><th>Retries</th><th>Last error</th></tr></thead>
<tbody>
{{range .Page.Calls}}
<tr id="c-{{.OperationID}}">
  <td class="nw">{{utc .CreatedAt}}</td><td class="nw status-{{.Status}}">{{.Status}}</td>
  <td><a href="items/{{.Kind}}/{{.OperationID}}" title="request and audit trail">{{.Kind}}</a></td><td class="nw">{{.SourceSiteID}}</td><td>{{.Target}}</td>
  <td class="n">{{.RetryCount}}</td><td class="err-text">{{.LastError}}</td>
</tr>
{{else}}<tr><td colspan="7" class="muted">No call or write matches.</td></tr>
{{end}}
</tbody>
</table>
{{with .Next}}<p><a id="next" href="{{.}}">Older →</a></p>{{end}}
</body>
</html>
`
