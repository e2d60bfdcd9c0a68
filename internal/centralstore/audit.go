package centralstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/contract"
)

// AuditEventType is what happened to an operation.
type AuditEventType string

// Audit event types.
const (
	// AuditEnqueued: central learned of the operation (at: when the site accepted it).
	AuditEnqueued AuditEventType = "Enqueued"
	// AuditAttempt: one delivery attempt; Status is the outcome, Detail the
	// retry count and last error.
	AuditAttempt AuditEventType = "Attempt"
	// AuditTerminal: the operation reached Delivered, Failed, Discarded or
	// Parked (which waits for an operator).
	AuditTerminal AuditEventType = "Terminal"
	// AuditOperatorRetry and AuditOperatorDiscard: an operator acted on a
	// parked operation; Operator and Reason are what the signal carried.
	AuditOperatorRetry   AuditEventType = "OperatorRetry"
	AuditOperatorDiscard AuditEventType = "OperatorDiscard"
)

// AuditEvent is one row of audit_log. EventID is deterministic (see package
// audit), so writing an event twice stores it once.
type AuditEvent struct {
	EventID     string
	OperationID string
	Kind        string // workflows.KindNotification, KindExternalCall or KindDatabaseWrite
	SiteID      string
	// SourceNode is the site node that accepted the operation, when the
	// change knows it ("" is stored as NULL).
	SourceNode string
	Event      AuditEventType
	Status     contract.Status
	Detail     string
	Operator   string
	Reason     string
	At         time.Time
}

// auditColumns is every column of audit_log, in the order of auditArgs and
// scanAuditEvent.
var auditColumns = []string{
	"event_id", "operation_id", "kind", "site_id", "event", "status", "detail", "operator", "reason", "at", "source_node",
}

// Longest values stored: a longer operator name would fail SQL Server's
// column, and one bad event must not block the batches behind it.
const (
	maxAuditOperator = 256
	maxAuditText     = 4000
)

// InsertAuditEvents stores the events whose id is not stored yet, with one
// statement per chunk in one transaction, and returns how many it inserted.
// An event repeated in events is stored once.
func (s *Store) InsertAuditEvents(ctx context.Context, events []AuditEvent) (int, error) {
	var stored []AuditEvent
	err := s.inTx(ctx, func(tx *sql.Tx) (err error) {
		stored, err = s.insertAuditEvents(ctx, tx, events)
		return err
	})
	if err != nil {
		return 0, err
	}
	s.auditStored(stored)
	return len(stored), nil
}

// ObserveAudit has fn told of the audit events this store writes, once
// their transaction committed, each event once: those whose id was stored
// already are left out (central's metrics count what fn is told). fn runs
// on the writing goroutine and must not block. Call it before the store is
// used.
func (s *Store) ObserveAudit(fn func(stored []AuditEvent)) { s.onAudit = fn }

// auditStored tells the observer (ObserveAudit) of events committed.
func (s *Store) auditStored(events []AuditEvent) {
	if s.onAudit != nil && len(events) > 0 {
		s.onAudit(events)
	}
}

// insertAuditEvents stores events in tx and returns those it inserted (an
// event whose id is stored already is not): the state changes that write
// audit events write them in their own transaction, so an event is stored
// exactly when the change it describes is. The caller tells auditStored of
// them once tx committed.
func (s *Store) insertAuditEvents(ctx context.Context, tx *sql.Tx, events []AuditEvent) ([]AuditEvent, error) {
	events = firstByEventID(events)
	// In key order: a fleet's event ids fall all over the key, and in order
	// the inserts walk each index page once. 100,000 audited changes on
	// interleaved ids, eight batches a transaction, took 7.4 s instead of
	// 8.5-10.3 s.
	slices.SortFunc(events, func(a, b AuditEvent) int { return strings.Compare(a.EventID, b.EventID) })
	for _, e := range events {
		if err := checkTrailID(e); err != nil {
			return nil, fmt.Errorf("insert audit events: %w", err)
		}
	}
	var stored []AuditEvent
	for chunk := range slices.Chunk(events, s.dialect.auditChunk) {
		args := make([]any, 0, len(chunk)*len(auditColumns))
		for _, e := range chunk {
			args = auditArgs(args, e)
		}
		inserted, err := s.insertedIDs(ctx, tx, s.bind(s.dialect.insertAuditEvents(len(chunk))), len(chunk), args...)
		if err != nil {
			return nil, fmt.Errorf("insert audit events: write %d events: %w", len(chunk), err)
		}
		for _, e := range chunk {
			if inserted[e.EventID] {
				stored = append(stored, e)
			}
		}
	}
	return stored, nil
}

// insertedIDs runs query, a chunk of rows audit events that returns the id
// of each event it inserted, in tx, and returns those ids.
func (s *Store) insertedIDs(ctx context.Context, tx *sql.Tx, query string, rows int, args ...any) (map[string]bool, error) {
	result, err := s.queryChunk(ctx, tx, query, rows, s.dialect.auditChunk, args...)
	if err != nil {
		return nil, err
	}
	defer result.Close()
	ids := make(map[string]bool, rows)
	for result.Next() {
		var id string
		if err := result.Scan(&id); err != nil {
			return nil, fmt.Errorf("read the ids inserted: %w", err)
		}
		ids[id] = true
	}
	return ids, result.Err()
}

// ListAuditEvents returns the events of one operation (a notification id,
// a tracked operation id, or a list's or channel's operation id), oldest
// first.
func (s *Store) ListAuditEvents(ctx context.Context, operationID string) ([]AuditEvent, error) {
	rows, err := s.reads.QueryContext(ctx, s.bind(listAuditEventsSQL), auditEventsArgs(operationID)...)
	if err != nil {
		return nil, fmt.Errorf("list audit events of %s: %w", operationID, err)
	}
	defer rows.Close()
	var out []AuditEvent
	for rows.Next() {
		e, err := scanAuditEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("list audit events of %s: %w", operationID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit events of %s: %w", operationID, err)
	}
	return out, nil
}

// definitionKinds are the events of lists and channels, whose ids are
// random: the index audit_log_definitions holds only these.
const definitionKinds = `kind IN ('` + AuditKindList + `', '` + AuditKindChannel + `')`

// listAuditEventsSQL reads an operation's events where the primary key
// keeps them together: the id of every event of a notification or a
// cached call begins with its workflow id and a slash (package audit), so
// they are one range of event ids. The events of a list or channel come
// from their own index.
var listAuditEventsSQL = func() string {
	columns := `SELECT ` + strings.Join(auditColumns, ", ") + ` FROM audit_log WHERE `
	byID := columns + `event_id >= ? AND event_id < ? AND operation_id = ?`
	return byID + ` UNION ALL ` + byID + ` UNION ALL ` + columns + definitionKinds + ` AND operation_id = ?
		ORDER BY at, event_id`
}()

// auditEventsArgs are listAuditEventsSQL's arguments: the range of each
// trail prefix of operationID, then operationID for the definitions.
func auditEventsArgs(operationID string) []any {
	var args []any
	for _, prefix := range trailPrefixes(operationID) {
		args = append(args, prefix, prefix[:len(prefix)-1]+"0", operationID) // '0' follows '/'
	}
	return append(args, operationID)
}

// trailPrefixes are what the ids of operationID's events may begin with:
// its workflow id as a notification and as a cached call, and a slash.
func trailPrefixes(operationID string) []string {
	return []string{contract.NotificationWorkflowID(operationID) + "/", contract.CachedCallWorkflowID(operationID) + "/"}
}

// checkTrailID refuses an event its operation's trail would never show:
// one of a notification or cached call whose id does not begin with one of
// its trail prefixes (package audit makes every id that way). It runs for
// every event stored, so it reads the id in place rather than building the
// prefixes.
func checkTrailID(e AuditEvent) error {
	if e.Kind == AuditKindList || e.Kind == AuditKindChannel {
		return nil
	}
	for _, fromWorkflowID := range []func(string) (string, bool){contract.NotificationIDFromWorkflowID, contract.CachedCallIDFromWorkflowID} {
		if rest, ok := fromWorkflowID(e.EventID); ok {
			if after, ok := strings.CutPrefix(rest, e.OperationID); ok && strings.HasPrefix(after, "/") {
				return nil
			}
		}
	}
	prefixes := trailPrefixes(e.OperationID)
	return fmt.Errorf("audit event %q of operation %q: its id must begin with %q or %q, or its operation's trail would not show it",
		e.EventID, e.OperationID, prefixes[0], prefixes[1])
}

// firstByEventID keeps the first event of each id, in order: SQL Server's
// MERGE would insert both copies of an id new to the table.
func firstByEventID(events []AuditEvent) []AuditEvent {
	seen := make(map[string]bool, len(events))
	out := make([]AuditEvent, 0, len(events))
	for _, e := range events {
		if !seen[e.EventID] {
			seen[e.EventID] = true
			out = append(out, e)
		}
	}
	return out
}

func auditArgs(args []any, e AuditEvent) []any {
	return append(args, e.EventID, e.OperationID, e.Kind, e.SiteID, string(e.Event), string(e.Status),
		truncate(e.Detail, maxAuditText), truncate(e.Operator, maxAuditOperator), truncate(e.Reason, maxAuditText), utc(e.At),
		sql.NullString{String: e.SourceNode, Valid: e.SourceNode != ""})
}

func scanAuditEvent(row scanner) (AuditEvent, error) {
	var e AuditEvent
	var event, status string
	var node sql.NullString
	err := row.Scan(&e.EventID, &e.OperationID, &e.Kind, &e.SiteID, &event, &status, &e.Detail, &e.Operator, &e.Reason, &e.At, &node)
	if err != nil {
		return AuditEvent{}, err
	}
	e.Event, e.Status, e.At, e.SourceNode = AuditEventType(event), contract.Status(status), e.At.UTC(), node.String
	return e, nil
}

// truncate cuts s to at most n characters, on a character boundary.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
