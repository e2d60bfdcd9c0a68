package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/operator"
)

// itemData is what an item's page renders: the item as the list shows it,
// what it carries, and its audit trail.
type itemData struct {
	pageData
	Item centralstore.OperatorItem
	// Notification is set for a notification: subject, body, list and the
	// targets its delivery used.
	Notification *centralstore.Notification
	// Call is set for a cached call or write: central's copy of its site
	// tracking row.
	Call *contract.TrackedOperation
	// Request is a call's request (system, method and params, or
	// connection, SQL and args; secret params redacted by the site),
	// indented; RequestNote says why it is missing when it is.
	Request, RequestNote string
	Events               []centralstore.AuditEvent
	// SiteLag is a call's latest operator action when the site's change
	// for it has not reached central yet (see siteLag): the trail is not
	// complete, and the page says so.
	SiteLag *centralstore.AuditEvent
}

// item renders one notification's or call's page: what it carries, where
// it stands, every audit event, and Retry and Discard while it is parked.
func (h *handler) item(w http.ResponseWriter, r *http.Request, who identity) {
	kind, id := r.PathValue("kind"), r.PathValue("id")
	if err := checkItemPath(kind, id); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	data := itemData{pageData: h.pageData(w, r, who)}
	err := h.loadItem(r.Context(), kind, id, &data)
	if err == nil {
		data.Events, err = h.store.ListAuditEvents(r.Context(), id)
	}
	if data.Call != nil {
		data.SiteLag = siteLag(*data.Call, data.Events)
	}
	switch {
	case errors.Is(err, centralstore.ErrNotFound):
		http.Error(w, fmt.Sprintf("%s %s: central has no such item (purged, or not handed off yet)", kind, id), http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, "central store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	render(w, "item", data)
}

// loadItem fills data's item from the central store, and a call's request
// from its workflow's status query.
func (h *handler) loadItem(ctx context.Context, kind, id string, data *itemData) error {
	if kind == contract.KindNotification {
		n, err := h.store.GetNotification(ctx, id)
		if err != nil {
			return err
		}
		data.Notification = &n
		data.Item = centralstore.OperatorItem{
			Kind: kind, ID: id, Site: n.SourceSiteID, Status: n.Status, Target: n.ListName, Subject: n.Subject,
			RetryCount: n.RetryCount, LastError: n.LastError, CreatedAt: n.CreatedAt,
			LastAttemptAt: n.LastAttemptAt, NextAttemptAt: n.NextAttemptAt,
		}
		return nil
	}
	row, err := h.siteCall(ctx, kind, id)
	if err != nil {
		return err
	}
	data.Call = &row
	data.Item = centralstore.OperatorItem{
		Kind: kind, ID: id, Site: row.SourceSiteID, Status: row.Status, Target: row.Target,
		RetryCount: row.RetryCount, LastError: row.LastError, CreatedAt: row.CreatedAt,
		LastAttemptAt: row.LastAttemptAt, NextAttemptAt: row.NextAttemptAt,
	}
	data.Request, data.RequestNote = h.callRequest(ctx, data.Item)
	return nil
}

// callRequest asks a call's workflow what the call sends: the site keeps
// the payload in its buffer and hands central only this operator's view.
func (h *handler) callRequest(ctx context.Context, it centralstore.OperatorItem) (request, note string) {
	if h.tc == nil {
		return "", "Not shown: the page has no Temporal client."
	}
	st, err := operator.QueryState(ctx, h.tc, it.WorkflowID(), "")
	if err != nil {
		return "", fmt.Sprintf("Not shown: %v. A call handed off before it was accepted at central, or whose workflow is past retention, has none.", err)
	}
	if st.Call == nil || len(st.Call.Request) == 0 {
		return "", "Not shown: the workflow holds no request view (a call handed off by an older site)."
	}
	var buf bytes.Buffer
	if json.Indent(&buf, st.Call.Request, "", "  ") != nil {
		return string(st.Call.Request), ""
	}
	return buf.String(), ""
}

// siteLag is the latest operator action in events when central's copy of
// call does not show it yet: the site applies an action to its own row and
// telemetry brings that row (with the attempts before it) later, so until
// then the row keeps another status and was last changed before the
// action was audited. nil when the site's changes are in.
func siteLag(call contract.TrackedOperation, events []centralstore.AuditEvent) *centralstore.AuditEvent {
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Event != centralstore.AuditOperatorRetry && e.Event != centralstore.AuditOperatorDiscard {
			continue
		}
		if call.Status != e.Status && call.UpdatedAt.Before(e.At) {
			return &e
		}
		return nil
	}
	return nil
}

// checkItemPath validates an item's path: a known kind and a canonical UUID.
func checkItemPath(kind, id string) error {
	if !slices.Contains(contract.Kinds(), kind) {
		return badf("kind %q: want one of %s", kind, strings.Join(contract.Kinds(), ", "))
	}
	if !contract.IsOperationID(id) {
		return badf("id %q is not a UUID like 343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11", id)
	}
	return nil
}

const itemHTML = `{{template "head" (print .Item.Kind " " .Item.ID " · ")}}
<body>
{{with .Item}}
<p><a href="../../" id="back">← Outbox</a></p>
<h1>{{.Kind}} {{.ID}}</h1>
{{if not $.Open}}<p class="sub" id="who">Signed in as <b>{{$.Who.Name}}</b> ({{$.Who.Role}})</p>{{end}}
{{with $.Flash}}<p class="flash {{if .OK}}ok{{else}}err{{end}}" role="status">{{.Message}}</p>{{end}}
<table id="summary" class="kv">
<tr><th>Status</th><td class="status-{{.Status}}" id="status">{{.Status}}</td></tr>
<tr><th>Site</th><td>{{.Site}}</td></tr>
<tr><th>{{if $.Notification}}List{{else}}Target{{end}}</th><td>{{.Target}}</td></tr>
<tr><th>Created</th><td>{{utc .CreatedAt}} ({{$.Age .CreatedAt}} ago)</td></tr>
<tr><th>Retries</th><td>{{.RetryCount}}</td></tr>
{{with .LastAttemptAt}}<tr><th>Last attempt</th><td>{{utc .}}</td></tr>{{end}}
{{with .NextAttemptAt}}<tr><th>Next attempt</th><td>{{utc .}}</td></tr>{{end}}
{{if .LastError}}<tr><th>Last error</th><td class="err-text" id="last-error">{{.LastError}}</td></tr>{{end}}
<tr><th>Workflow</th><td><a href="{{$.WorkflowURL .}}" target="_blank" rel="noopener">{{.WorkflowID}}</a> in the Temporal Web UI</td></tr>
</table>
{{if parked .Status}}{{if $.Who.CanAct}}<h2>Parked: retry or discard</h2>
<form class="act" method="post" action="{{.ID}}/retry">
  <input type="hidden" name="return" value="item">
  <input name="reason" placeholder="reason" maxlength="1000" aria-label="reason">
  <button type="submit" class="retry">Retry</button>
  <button type="submit" class="discard" formaction="{{.ID}}/discard">Discard</button>
</form>{{else}}<p class="muted">Parked: an operator can retry or discard it.</p>{{end}}{{end}}
{{end}}
{{with .SiteLag}}<p class="flash err" id="site-lag" role="status">Site changes still arriving: {{.Event}} by {{.Operator}} at {{utc .At}}
is not in central's copy yet, which the site last changed at {{utc $.Call.UpdatedAt}} ({{$.Call.Status}}). The site's
attempts and the action's outcome join the trail below as its telemetry arrives: reload to see them.</p>{{end}}

{{with .Notification}}
<h2>Notification</h2>
<table id="payload" class="kv">
<tr><th>Type</th><td>{{.Type}}</td></tr>
<tr><th>Subject</th><td id="subject">{{.Subject}}</td></tr>
<tr><th>Body</th><td><pre id="body">{{.Body}}</pre></td></tr>
<tr><th>Resolved targets</th><td>{{range .ResolvedTargets}}{{.}}<br>{{else}}<span class="muted">none yet: resolved at the first attempt</span>{{end}}</td></tr>
<tr><th>Source</th><td>site {{.SourceSiteID}}{{with .SourceNode}}, node {{.}}{{end}}{{with .SourceInstanceID}}, instance {{.}}{{end}}{{with .SourceScript}}, script {{.}}{{end}}</td></tr>
<tr><th>Enqueued on site</th><td>{{utc .SiteEnqueuedAt}}</td></tr>
{{with .DeliveredAt}}<tr><th>Delivered</th><td>{{utc .}}</td></tr>{{end}}
</table>
{{end}}
{{with .Call}}
<h2>Request</h2>
{{if $.Request}}<pre id="request">{{$.Request}}</pre>{{else}}<p class="muted" id="request-note">{{$.RequestNote}}</p>{{end}}
<table class="kv">
<tr><th>Source</th><td>site {{.SourceSiteID}}{{with .SourceNode}}, node {{.}}{{end}}{{with .SourceInstance}}, instance {{.}}{{end}}{{with .SourceScript}}, script {{.}}{{end}}</td></tr>
{{with .TerminalAt}}<tr><th>Finished</th><td>{{utc .}}</td></tr>{{end}}
</table>
{{end}}

<h2>Audit trail</h2>
<table id="audit">
<thead><tr><th>At (UTC)</th><th>Event</th><th>Status</th><th>Detail</th><th>Operator</th><th>Reason</th></tr></thead>
<tbody>
{{range .Events}}<tr><td class="nw">{{utc .At}}</td><td>{{.Event}}</td><td class="status-{{.Status}}">{{.Status}}</td><td class="err-text">{{.Detail}}</td><td>{{.Operator}}</td><td>{{.Reason}}</td></tr>
{{else}}<tr><td colspan="6" class="muted">No audit events.</td></tr>
{{end}}
</tbody>
</table>
</body>
</html>
`
