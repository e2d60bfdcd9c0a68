package demosystem

import (
	"bytes"
	"html/template"
	"net/http"
)

// page is what a developer watches while the system fails and retries come
// in; it refreshes itself for that reason. html/template escapes paths and
// queries, which come from whoever calls the API.
var page = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>Outpost demo system</title>
<style>body{font-family:sans-serif}th,td{padding:2px 10px;text-align:left}.failed{color:#b00}</style>
</head><body>
<h1>Outpost demo system</h1>
<p>Failure mode: <b>{{.Mode}}</b></p>
<pre>
curl -XPOST '{{.URL}}/control/fail?n=3&amp;status=503'   # the next 3 API requests answer 503
curl -XPOST '{{.URL}}/control/fail?status=500'       # every API request answers 500 until recover
curl -XPOST '{{.URL}}/control/recover'
curl -s '{{.URL}}/requests'                          # every request as JSON
curl -XPOST '{{.URL}}/api/orders/42' -d '{"qty": 3}'
</pre>
<h2>Last {{len .Requests}} of {{.Total}} API requests, newest first</h2>
<table>
<tr><th>#</th><th>time</th><th>method</th><th>path</th><th>status</th></tr>
{{range .Requests}}<tr><td>{{.ID}}</td><td>{{.At.Format "15:04:05.000"}}</td><td>{{.Method}}</td><td>{{.Path}}{{if .Query}}?{{.Query}}{{end}}</td><td class="{{if ge .Status 400}}failed{{end}}">{{.Status}}</td></tr>
{{end}}</table>
</body></html>
`))

// pageData is what the page shows.
type pageData struct {
	URL      string
	Mode     string
	Requests []Request
	Total    int
}

func (s *System) servePage(w http.ResponseWriter, _ *http.Request) {
	data := pageData{URL: s.URL(), Mode: s.mode()}
	data.Requests, data.Total = s.recent(pageRequests)
	// Render first so a template error is a clean 500, not half a page.
	var buf bytes.Buffer
	if err := page.Execute(&buf, data); err != nil {
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes()) // the client has gone; nothing to tell it
}
