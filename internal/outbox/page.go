package outbox

import (
	"bytes"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// pageData is what the template renders.
type pageData struct {
	Now              time.Time
	StuckAge, Window time.Duration
	Report           centralstore.KPIReport
	Items            centralstore.OperatorItems
	// Form echoes the filter parameters; Back is them encoded, for the
	// action forms to return to the same list.
	Form     map[string]string
	Back     string
	Statuses []string
	Kinds    []string
	Flash    *flash
	// Who is the signed-in person; Open is true when the page asks nobody.
	Who  identity
	Open bool
	// Region is the one region the page's central serves; zero for none.
	Region contract.Region

	uiURL, namespace string
}

// TitleFor is a page's title start (page, "Lists · " or "" for the
// outbox) led by the page's region, if it serves one.
func (d pageData) TitleFor(page string) string {
	if d.Region.Name == "" {
		return page
	}
	return page + "Region " + d.Region.Name + " · "
}

// WorkflowURL links an item to its workflow in the Temporal Web UI, which
// opens the latest run of a workflow id.
func (d pageData) WorkflowURL(it centralstore.OperatorItem) string {
	return d.uiURL + "/namespaces/" + url.PathEscape(d.namespace) + "/workflows/" + url.PathEscape(it.WorkflowID())
}

// Age is how long before the page's time t was.
func (d pageData) Age(t time.Time) string { return FormatAge(d.Now.Sub(t)) }

// Oldest is a KPI's oldest pending age, "-" when nothing is queued.
func (d pageData) Oldest(k centralstore.KPIs) string {
	if k.OldestPendingAt == nil {
		return "-"
	}
	return FormatAge(k.OldestPendingAge())
}

var funcs = template.FuncMap{
	"utc":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") + " UTC" },
	"dur":    FormatAge,
	"parked": func(s contract.Status) bool { return s == contract.StatusParked },
	// itemPath is an item's page, or with an action, where its button posts.
	"itemPath": func(it centralstore.OperatorItem, action string) string {
		if action == "" {
			return "items/" + it.Kind + "/" + it.ID
		}
		return "items/" + it.Kind + "/" + it.ID + "/" + action
	},
}

// templates are the outbox page ("outbox"), an item's page ("item"), the
// list of every notification ("notifications"), of every call and write
// ("calls") and the notification lists ("lists"), which share one head
// ("head"), style sheet ("style") and region filter ("regionFilter").
var templates = parseTemplates()

func parseTemplates() *template.Template {
	t := template.New("").Funcs(funcs)
	template.Must(t.New("style").Parse(styleHTML))
	template.Must(t.New("head").Parse(headHTML))
	template.Must(t.New("regionFilter").Parse(regionFilterHTML))
	template.Must(t.New("outbox").Parse(outboxHTML))
	template.Must(t.New("item").Parse(itemHTML))
	template.Must(t.New("notifications").Parse(notificationsHTML))
	template.Must(t.New("calls").Parse(callsHTML))
	template.Must(t.New("lists").Parse(listsHTML))
	return t
}

// headHTML opens every page up to <body>; its argument is the start of
// the title ("Lists · "), "" for the outbox itself.
const headHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.}}Outpost outbox</title>
{{template "style"}}
</head>`

// regionFilterHTML is a list's region filter, shown when the page's
// central serves a region: its store holds that region's work alone, so it
// is the filter's one value (a link naming another region is refused).
const regionFilterHTML = `{{with .Region.Name}}<label>Region<select name="region" title="this central serves region {{.}} only: another region's work is on its own central's page"><option>{{.}}</option></select></label>{{end}}`

const styleHTML = `<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d2733; background: #f6f7f9; }
h1 { font-size: 1.4rem; margin: 0 0 .2rem; } h2 { font-size: 1.1rem; margin: 1.6rem 0 .5rem; }
.sub { color: #5b6675; margin: 0 0 1rem; }
.tiles { display: flex; gap: .8rem; flex-wrap: wrap; }
.tile { background: #fff; border: 1px solid #d9dee5; border-radius: 6px; padding: .7rem 1rem; min-width: 9rem; }
.tile .value { display: block; font-size: 1.8rem; font-weight: 600; }
.tile .label { color: #5b6675; }
.tile.warn .value { color: #b45309; } .tile.bad .value { color: #b91c1c; }
table { border-collapse: collapse; background: #fff; width: 100%; }
th, td { border: 1px solid #d9dee5; padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: #eef1f5; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.total td { font-weight: 600; }
.flash { padding: .6rem 1rem; border-radius: 6px; margin: 0 0 1rem; }
.flash.ok { background: #e7f6ec; border: 1px solid #86c79c; } .flash.err { background: #fdecec; border: 1px solid #e39a9a; }
form.filter { display: flex; gap: .5rem; flex-wrap: wrap; align-items: end; margin-bottom: .6rem; }
form.filter label { display: flex; flex-direction: column; font-size: .85rem; color: #5b6675; }
.status-Parked { color: #b91c1c; font-weight: 600; } .status-Retrying, .status-Pending { color: #b45309; font-weight: 600; }
.err-text { color: #5b6675; max-width: 28rem; overflow-wrap: anywhere; }
form.act { display: flex; gap: .3rem; flex-wrap: wrap; }
form.act input { width: 9rem; }
form.who { float: right; color: #5b6675; }
.muted { color: #5b6675; }
.nw { white-space: nowrap; }
#sites { width: auto; min-width: 50%; }
table.kv { width: auto; min-width: 40%; } table.kv th { width: 10rem; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 13px; }
</style>`

const outboxHTML = `{{template "head" (.TitleFor "")}}
<body>
<h1>Outpost outbox{{with .Region.Name}} · region {{.}}{{end}}</h1>
{{if not .Open}}<form class="who" method="post" action="logout"><span id="who">Signed in as <b>{{.Who.Name}}</b> ({{.Who.Role}})</span>{{if .Who.ViaSession}} <button type="submit" id="sign-out">Sign out</button>{{end}}</form>{{end}}
<p class="sub">At {{utc .Now}} · stuck: Pending or Retrying for more than {{dur .StuckAge}} · delivered: last {{dur .Window}}</p>
{{with .Flash}}<p class="flash {{if .OK}}ok{{else}}err{{end}}" role="status">{{.Message}}</p>{{end}}

{{with .Report.Global.Total}}
{{with $.Region.Name}}<h2 id="tiles-title">Region {{.}}</h2>
<p class="sub">This central serves region {{.}} only: its store, and so every number and list on this page, holds that region's work alone. Another region's is on its own central's page.</p>{{end}}
<div class="tiles">
  {{with $.Region.Name}}<div class="tile" id="tile-region"><span class="value">{{.}}</span><span class="label">region, queue {{$.Region.TaskQueue}}</span></div>{{end}}
  <div class="tile" id="tile-queue"><span class="value">{{.Queue}}</span><span class="label">in queue</span></div>
  <div class="tile{{if .Stuck}} warn{{end}}" id="tile-stuck"><span class="value">{{.Stuck}}</span><span class="label">stuck</span></div>
  <div class="tile{{if .Parked}} bad{{end}}" id="tile-parked"><span class="value">{{.Parked}}</span><span class="label">parked</span></div>
  <div class="tile" id="tile-delivered"><span class="value">{{.Delivered}}</span><span class="label">delivered in {{dur $.Window}}</span></div>
  <div class="tile" id="tile-oldest"><span class="value">{{$.Oldest .}}</span><span class="label">oldest pending</span></div>
</div>
{{end}}

<h2>By site</h2>
<table id="sites">
<thead><tr><th>Site</th><th>Kind</th><th>Queue</th><th>Stuck</th><th>Parked</th><th>Delivered ({{dur .Window}})</th><th>Oldest pending</th></tr></thead>
<tbody>
{{range .Report.Sites}}{{$site := .Site}}
{{range .Kinds}}{{if or .Queue .Parked .Delivered}}<tr><td>{{$site}}</td><td>{{.Kind}}</td><td class="n">{{.Queue}}</td><td class="n">{{.Stuck}}</td><td class="n">{{.Parked}}</td><td class="n">{{.Delivered}}</td><td class="n">{{$.Oldest .KPIs}}</td></tr>
{{end}}{{end}}<tr class="total"><td>{{$site}}</td><td>all</td><td class="n">{{.Total.Queue}}</td><td class="n">{{.Total.Stuck}}</td><td class="n">{{.Total.Parked}}</td><td class="n">{{.Total.Delivered}}</td><td class="n">{{$.Oldest .Total}}</td></tr>
{{else}}<tr><td colspan="7" class="muted">No site has anything queued, parked or delivered in the last {{dur .Window}}.</td></tr>
{{end}}
</tbody>
</table>

<h2>Stuck and parked</h2>
<p class="sub">Delivered, failed and discarded ones too: <a href="notifications" id="all-notifications">every notification</a>, <a href="calls" id="all-calls">every call and write</a>. Who they reach: <a href="lists" id="lists-link">notification lists</a>.</p>
<form class="filter" method="get" action="">
  <label>Status<select name="status"><option value="">stuck or parked</option>{{range .Statuses}}<option{{if eq . (index $.Form "status")}} selected{{end}}>{{.}}</option>{{end}}</select></label>
  <label>Kind<select name="kind"><option value="">any</option>{{range .Kinds}}<option{{if eq . (index $.Form "kind")}} selected{{end}}>{{.}}</option>{{end}}</select></label>
  <label>Site<input name="site" value="{{index .Form "site"}}" size="10"></label>
  <label>Target or list<input name="target" value="{{index .Form "target"}}" size="14"></label>
  {{template "regionFilter" .}}
  <label>Created from (UTC)<input type="datetime-local" name="from" value="{{index .Form "from"}}"></label>
  <label>to (UTC)<input type="datetime-local" name="to" value="{{index .Form "to"}}"></label>
  <label>Subject or target contains<input type="search" name="q" value="{{index .Form "q"}}" size="16"></label>
  <button type="submit">Filter</button> <a href="./">Clear</a>
</form>
<table id="items">
<thead><tr><th>Status</th><th>Kind</th><th>Site</th><th>Target</th><th>Subject</th><th>Age</th><th>Retries</th><th>Last error</th><th>Workflow</th><th>Action</th></tr></thead>
<tbody>
{{range .Items.Items}}
<tr id="item-{{.ID}}">
  <td class="nw status-{{.Status}}">{{.Status}}{{if .Stuck}} (stuck){{end}}</td>
  <td><a class="details" href="{{itemPath . ""}}" title="payload and audit trail">{{.Kind}}</a></td><td class="nw">{{.Site}}</td><td>{{.Target}}</td><td>{{.Subject}}</td>
  <td class="nw" title="created {{utc .CreatedAt}}">{{$.Age .CreatedAt}}</td><td class="n">{{.RetryCount}}</td>
  <td class="err-text">{{.LastError}}</td>
  <td><a class="workflow" href="{{$.WorkflowURL .}}" target="_blank" rel="noopener">{{.WorkflowID}}</a></td>
  <td>{{if not (parked .Status)}}<span class="muted">waits for its next attempt</span>{{else if $.Who.CanAct}}<form class="act" method="post" action="{{itemPath . "retry"}}">
    <input type="hidden" name="back" value="{{$.Back}}">
    <input name="reason" placeholder="reason" maxlength="1000" aria-label="reason">
    <button type="submit" class="retry">Retry</button>
    <button type="submit" class="discard" formaction="{{itemPath . "discard"}}">Discard</button>
  </form>{{else}}<span class="muted">parked: an operator can retry or discard it</span>{{end}}</td>
</tr>
{{else}}<tr><td colspan="10" class="muted">Nothing stuck or parked matches.</td></tr>
{{end}}
</tbody>
</table>
{{if .Items.More}}<p class="muted">Showing the newest {{len .Items.Items}}; narrow the filter to see the rest.</p>{{end}}
</body>
</html>
`

// render writes the template name with data, or a 500 if the template
// fails before anything was sent.
func render(w http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	_, _ = w.Write(buf.Bytes())
}
