package smtpsink

import (
	"html/template"
	"net/http"
	"strings"
)

// acceptsHTML is a browser asking: browsers name text/html in Accept, curl
// and scripts send */* or nothing and keep getting JSON.
func acceptsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// pageTemplate lists the messages; each opens onto its raw message. The
// template escapes every field: subjects and bodies are whatever was sent.
var pageTemplate = template.Must(template.New("sink").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>SMTP sink ({{len .}})</title>
<style>
body { font-family: sans-serif; margin: 1.5em; }
summary { cursor: pointer; padding: .3em 0; }
summary span { display: inline-block; margin-right: 1.5em; }
.id { font-family: monospace; color: #555; }
pre { background: #f4f4f4; padding: .8em; overflow-x: auto; white-space: pre-wrap; }
</style>
</head>
<body>
<h1>SMTP sink: {{len .}} message(s), newest first</h1>
<p>Click a message for the message as received. The same list as JSON: any request without <code>Accept: text/html</code> (<code>curl</code>).</p>
{{range .}}<details>
<summary><span>{{.ReceivedAt.Format "2006-01-02 15:04:05Z07:00"}}</span><span>from {{.From}}</span><span>to {{range $i, $to := .To}}{{if $i}}, {{end}}{{$to}}{{end}}</span><span><b>{{.Subject}}</b></span><span class="id">{{.NotificationID}}</span></summary>
<pre>{{printf "%s" .Raw}}</pre>
</details>
{{else}}<p>Nothing received yet.</p>
{{end}}</body>
</html>
`))

// servePage writes the messages (newest first) as the page.
func servePage(w http.ResponseWriter, msgs []Message) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = pageTemplate.Execute(w, msgs) // a write error means the browser left
}
