package workers

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/notification"
)

// eventKey is one (event, kind) of the audit log.
type eventKey struct{ event, kind string }

// countedEvents sums outpost_central_delivery_events_total by event and
// kind, over its statuses.
func countedEvents(t *testing.T, events *prometheus.CounterVec) map[eventKey]int {
	t.Helper()
	registry := prometheus.NewRegistry()
	registry.MustRegister(events)
	families, err := registry.Gather()
	require.NoError(t, err)
	out := map[eventKey]int{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[eventKey{labels["event"], labels["kind"]}] += int(m.GetCounter().GetValue())
		}
	}
	return out
}

// auditRows counts the events audit_log holds by event and kind, each
// row's and those it carries, those of operations (not of lists and
// channels).
func auditRows(t *testing.T, path string) map[eventKey]int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT event, kind, count(*) FROM (
			SELECT event, kind FROM audit_log
			UNION ALL SELECT json_extract(c.value, '$.event'), a.kind FROM audit_log a, json_each(a.carried) c
		) WHERE kind NOT IN (?, ?) GROUP BY event, kind`,
		centralstore.AuditKindList, centralstore.AuditKindChannel)
	require.NoError(t, err)
	defer rows.Close()
	out := map[eventKey]int{}
	for rows.Next() {
		var k eventKey
		var n int
		require.NoError(t, rows.Scan(&k.event, &k.kind, &n))
		out[k] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// siteCall is call id's tracking row as the site sends it after change seq.
func siteCall(id string, seq int64, status contract.Status, retries int, lastAttempt *time.Time) contract.TrackedOperation {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	row := contract.TrackedOperation{
		OperationID: id, Kind: contract.KindExternalCall, Target: "erp.createOrder", Status: status, RetryCount: retries,
		SourceSiteID: "plant-1", SourceNode: "node-a", CreatedAt: t0, UpdatedAt: t0.Add(time.Duration(seq) * time.Second),
		LastAttemptAt: lastAttempt, Seq: seq,
	}
	if retries > 0 {
		row.LastError = "HTTP 503"
	}
	if status.Terminal() {
		row.TerminalAt = &row.UpdatedAt
	}
	return row
}

// outpost_central_delivery_events_total counts each audit event once, a
// row's and those it carries: after a call delivered at once, a call
// retried and then delivered (their telemetry sent twice), and a
// notification recorded twice and delivered, the counter by event and kind
// equals the audit log's events.
func TestDeliveryEventsCountTheAuditRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "central.db")
	store, err := centralstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	defer store.Close()
	events := NewDeliveryEvents()
	store.ObserveAudit(countDeliveryEvents(events))

	mirror := &activities.MirrorActivities{Store: store}
	atOnce, retried := uuid.NewString(), uuid.NewString()
	t1, t2 := time.Date(2026, 5, 1, 12, 0, 1, 0, time.UTC), time.Date(2026, 5, 1, 12, 1, 0, 0, time.UTC)
	first := []contract.TrackedOperation{
		siteCall(atOnce, 1, contract.StatusPending, 0, nil),
		siteCall(atOnce, 2, contract.StatusDelivered, 0, &t1),
		siteCall(retried, 3, contract.StatusPending, 0, nil),
		siteCall(retried, 4, contract.StatusRetrying, 1, &t1),
	}
	second := []contract.TrackedOperation{siteCall(retried, 5, contract.StatusDelivered, 1, &t2)}
	for _, batch := range [][]contract.TrackedOperation{first, second, second, first} { // the last two sent again
		_, err := mirror.MirrorSiteCalls(ctx, batch)
		require.NoError(t, err)
	}

	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	require.NoError(t, store.PutList(ctx, centralstore.List{
		Name: "ops", Type: contract.NotificationTypeEmail, Targets: []string{"ops@example.com"}, TypeData: "{}", UpdatedBy: "test",
	}, "created"))
	notify := &notification.Activities{
		Store:    store,
		Adapters: NewAdapters(notification.MailerConfig{Host: "127.0.0.1", Port: sink.Port(), From: "outpost@example.com", TLS: notification.TLSNone, Timeout: 10 * time.Second}, "", nil),
		Policy:   contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: time.Minute},
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(notify)
	sub := contract.NotificationSubmission{NotificationID: uuid.NewString(), ListName: "ops", Subject: "Pump 3 tripped",
		SourceSiteID: "plant-1", SiteEnqueuedAt: t1}
	_, err = env.ExecuteActivity(notify.RecordNotification, sub) // a first task's record, then its retry records and delivers
	require.NoError(t, err)
	_, err = env.ExecuteActivity(notify.RecordAndDeliverNotification, contract.RecordAndDeliverInput{Submission: sub, Attempt: 1})
	require.NoError(t, err)
	require.Len(t, sink.Messages(), 1)

	rows := auditRows(t, path)
	require.Equal(t, 2, rows[eventKey{"Enqueued", contract.KindExternalCall}], "one Enqueued row per call")
	require.Equal(t, 3, rows[eventKey{"Attempt", contract.KindExternalCall}])
	require.Equal(t, 1, rows[eventKey{"Enqueued", contract.KindNotification}])
	require.Equal(t, rows, countedEvents(t, events), "the counter moves once per audit row written")
}
