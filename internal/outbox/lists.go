package outbox

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/notification"
)

// listsData is what the lists page renders.
type listsData struct {
	pageData
	Lists    []centralstore.List
	Channels []centralstore.Channel
	Types    []string
}

// lists shows the notification lists and delivery channels; operators get
// forms to change, create and remove lists.
func (h *handler) lists(w http.ResponseWriter, r *http.Request, who identity) {
	data := listsData{pageData: h.pageData(w, r, who), Types: contract.NotificationTypes()}
	var err error
	if data.Lists, err = h.store.Lists(r.Context()); err == nil {
		data.Channels, err = h.store.Channels(r.Context())
	}
	if err != nil {
		http.Error(w, "central store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	render(w, "lists", data)
}

// setList creates or changes a list from the form, as the signed-in
// operator; the next delivery attempt uses it.
func (h *handler) setList(w http.ResponseWriter, r *http.Request, who identity) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "read form: "+err.Error(), http.StatusBadRequest)
		return
	}
	f := r.PostForm
	changed := centralstore.List{
		Name: strings.TrimSpace(f.Get("name")), Type: f.Get("type"), Targets: formTargets(f.Get("targets")),
		Channel: strings.TrimSpace(f.Get("channel")), TypeData: f.Get("type_data"), Description: strings.TrimSpace(f.Get("description")),
	}
	old, err := h.store.GetList(r.Context(), changed.Name)
	existed := err == nil
	if err != nil && !errors.Is(err, centralstore.ErrNotFound) {
		http.Error(w, "central store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	diff, err := notification.SaveList(r.Context(), h.store, old, changed, existed, who.Name)
	h.backToLists(w, r, listFlash(changed.Name, diff, err))
}

// removeList removes a list as the signed-in operator.
func (h *handler) removeList(w http.ResponseWriter, r *http.Request, who identity) {
	name := r.PathValue("name")
	f := flash{OK: true, Message: fmt.Sprintf("Removed list %s: its notifications park (UnknownList) until it exists again.", name)}
	if err := h.store.DeleteList(r.Context(), name, who.Name); err != nil {
		f = flash{Message: fmt.Sprintf("Could not remove list %s: %v", name, err)}
	}
	h.backToLists(w, r, f)
}

func listFlash(name, diff string, err error) flash {
	switch {
	case err != nil:
		return flash{Message: fmt.Sprintf("List %s not saved: %v", name, err)}
	case diff == "":
		return flash{OK: true, Message: fmt.Sprintf("List %s is unchanged.", name)}
	default:
		return flash{OK: true, Message: fmt.Sprintf("List %s: %s. The next delivery attempt uses it.", name, diff)}
	}
}

// backToLists redirects to the lists page with f as its message.
func (h *handler) backToLists(w http.ResponseWriter, r *http.Request, f flash) {
	page := pagePath(r)
	setFlash(w, page, f)
	http.Redirect(w, r, page+"lists", http.StatusSeeOther)
}

// formTargets reads one target per line (or comma-separated).
func formTargets(s string) []string {
	var out []string
	for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' }) {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

const listsHTML = `{{template "head" "Lists · "}}
<body>
<p><a href="./" id="back">← Outbox</a></p>
<h1>Notification lists</h1>
<p class="sub">Central resolves a list at every delivery attempt: a change here reaches the next attempt of every notification to it, with no restart. Every change is in the audit log with who made it.</p>
{{with .Flash}}<p class="flash {{if .OK}}ok{{else}}err{{end}}" role="status">{{.Message}}</p>{{end}}
<table id="lists">
<thead><tr><th>List</th><th>Type</th><th>Targets</th><th>Channel</th><th>Type data</th><th>Updated (UTC)</th>{{if .Who.CanAct}}<th>Change</th>{{end}}</tr></thead>
<tbody>
{{range .Lists}}
<tr id="list-{{.Name}}">
  <td><b>{{.Name}}</b>{{with .Description}}<br><span class="muted">{{.}}</span>{{end}}</td><td>{{.Type}}</td>
  <td>{{range .Targets}}{{.}}<br>{{else}}<span class="muted">none: notifications park</span>{{end}}</td>
  <td>{{.Channel}}</td><td><code>{{.TypeData}}</code></td><td class="nw">{{utc .UpdatedAt}}<br><span class="muted">{{.UpdatedBy}}</span></td>
  {{if $.Who.CanAct}}<td>
    <form method="post" action="lists" class="edit">
      <input type="hidden" name="name" value="{{.Name}}"><input type="hidden" name="type" value="{{.Type}}">
      <input type="hidden" name="channel" value="{{.Channel}}"><input type="hidden" name="type_data" value="{{.TypeData}}">
      <label>Targets, one per line<br><textarea name="targets" rows="3" cols="36">{{range .Targets}}{{.}}
{{end}}</textarea></label><br>
      <label>Description <input name="description" value="{{.Description}}" size="24"></label>
      <button type="submit">Save</button>
    </form>
    <form method="post" action="lists/{{.Name}}/remove"><button type="submit">Remove</button></form>
  </td>{{end}}
</tr>
{{else}}<tr><td colspan="7" class="muted">No lists yet.</td></tr>
{{end}}
</tbody>
</table>
{{if .Who.CanAct}}
<h2>New list, or change every field of one</h2>
<form method="post" action="lists" id="new-list" class="filter">
  <label>Name<input name="name" required size="14"></label>
  <label>Type<select name="type">{{range .Types}}<option>{{.}}</option>{{end}}</select></label>
  <label>Targets, one per line<textarea name="targets" rows="3" cols="36"></textarea></label>
  <label>Channel<input name="channel" size="10"></label>
  <label>Type data (JSON)<input name="type_data" value="{}" size="24"></label>
  <label>Description<input name="description" size="20"></label>
  <button type="submit">Save</button>
</form>
{{end}}
<h2>Delivery channels</h2>
<table id="channels">
<thead><tr><th>Channel</th><th>Type</th><th>Settings</th><th>Updated (UTC)</th></tr></thead>
<tbody>
{{range .Channels}}<tr><td>{{.Name}}</td><td>{{.Type}}</td><td><code>{{.Settings}}</code></td><td class="nw">{{utc .UpdatedAt}} {{.UpdatedBy}}</td></tr>
{{else}}<tr><td colspan="4" class="muted">None: Email lists send through central.smtp. Add one with outpost channels set.</td></tr>
{{end}}
</tbody>
</table>
</body>
</html>
`
