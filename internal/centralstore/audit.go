package centralstore

import (
	"context"
	"database/sql"
	"encoding/json"
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

// AuditEvent is one event of the audit trail, and as written one row of
// audit_log with the events it carries. EventID is deterministic (see
// package audit), so writing an event twice stores it once.
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
	// Carries are the other events of this event's change, stored in its
	// row, and so exactly when it is (package audit groups a change's
	// events; a change costs one row). They share its OperationID, Kind,
	// SiteID and SourceNode and carry none of their own. The events
	// ListAuditEvents returns carry none.
	Carries []AuditEvent
}

// withCarried is every event e's row stores: the events it carries, then
// e itself without them.
func withCarried(e AuditEvent) []AuditEvent {
	out := make([]AuditEvent, 0, len(e.Carries)+1)
	out = append(out, e.Carries...)
	e.Carries = nil
	return append(out, e)
}

// auditColumns is every column of audit_log, in the order of auditArgs and
// scanAuditEvent.
var auditColumns = []string{
	"event_id", "operation_id", "kind", "site_id", "event", "status", "detail", "operator", "reason", "at", "source_node", "carried",
}

// carriedEvent is one carried event as audit_log's carried column holds it
// (a JSON array): what is its own; the rest is its head's.
type carriedEvent struct {
	EventID  string    `json:"id"`
	Event    string    `json:"event"`
	Status   string    `json:"status"`
	Detail   string    `json:"detail,omitempty"`
	Operator string    `json:"operator,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// Longest values stored: a longer operator name would fail SQL Server's
// column, and one bad event must not block the batches behind it.
const (
	maxAuditOperator = 256
	maxAuditText     = 4000
)

// InsertAuditEvents stores the events whose id is not stored yet, each with
// the events it carries, with one statement per chunk in one transaction,
// and returns how many events it inserted, carried ones included. An event
// repeated in events is stored once.
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
// their transaction committed, each event once, carried ones as events of
// their own: a row whose id was stored already is left out with the events
// it carries (central's metrics count what fn is told). fn runs on the
// writing goroutine and must not block. Call it before the store is used.
func (s *Store) ObserveAudit(fn func(stored []AuditEvent)) { s.onAudit = fn }

// auditStored tells the observer (ObserveAudit) of events committed.
func (s *Store) auditStored(events []AuditEvent) {
	if s.onAudit != nil && len(events) > 0 {
		s.onAudit(events)
	}
}

// insertAuditEvents stores events in tx and returns those it inserted,
// carried ones as events of their own (a row whose id is stored already is
// not inserted, nor are the events it carries): the state changes that
// write audit events write them in their own transaction, so an event is
// stored exactly when the change it describes is. The caller tells
// auditStored of them once tx committed.
func (s *Store) insertAuditEvents(ctx context.Context, tx *sql.Tx, events []AuditEvent) ([]AuditEvent, error) {
	events = firstByEventID(events)
	// In key order: a fleet's event ids fall all over the key, and in order
	// the inserts walk each index page once. 100,000 audited changes on
	// interleaved ids, eight batches a transaction, took 7.4 s instead of
	// 8.5-10.3 s.
	slices.SortFunc(events, func(a, b AuditEvent) int { return strings.Compare(a.EventID, b.EventID) })
	for _, e := range events {
		if err := checkAuditRow(e); err != nil {
			return nil, fmt.Errorf("insert audit events: %w", err)
		}
	}
	var stored []AuditEvent
	for chunk := range slices.Chunk(events, s.dialect.auditChunk) {
		args := make([]any, 0, len(chunk)*len(auditColumns))
		for _, e := range chunk {
			var err error
			if args, err = auditArgs(args, e); err != nil {
				return nil, fmt.Errorf("insert audit events: %w", err)
			}
		}
		inserted, err := s.insertedIDs(ctx, tx, s.bind(s.dialect.insertAuditEvents(len(chunk))), len(chunk), args...)
		if err != nil {
			return nil, fmt.Errorf("insert audit events: write %d events: %w", len(chunk), err)
		}
		for _, e := range chunk {
			if inserted[e.EventID] {
				stored = append(stored, withCarried(e)...)
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
// a tracked operation id, or a list's or channel's operation id), carried
// ones as events of their own, oldest first (by time, then id).
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
		out = append(out, withCarried(e)...)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit events of %s: %w", operationID, err)
	}
	return inTrailOrder(out), nil
}

// inTrailOrder sorts events by time, then id, as the query orders rows
// (carried events are not in its order), and keeps the first of an id
// stored twice.
func inTrailOrder(events []AuditEvent) []AuditEvent {
	slices.SortStableFunc(events, func(a, b AuditEvent) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.EventID, b.EventID)
	})
	return firstByEventID(events)
}

// definitionKinds are the events of lists and channels, whose ids are
// random: the index audit_log_definitions holds only these.
const definitionKinds = `kind IN ('` + AuditKindList + `', '` + AuditKindChannel + `')`

// listAuditEventsSQL reads an operation's events where the primary key
// keeps them together: the id of every event of a notification or a
// cached call begins with its workflow id and a slash (package audit), so
// they are one range of event ids. The events of a list or channel come
// from their own index. No ORDER BY: the events rows carry are sorted with
// them after (inTrailOrder).
var listAuditEventsSQL = func() string {
	columns := `SELECT ` + strings.Join(auditColumns, ", ") + ` FROM audit_log WHERE `
	byID := columns + `event_id >= ? AND event_id < ? AND operation_id = ?`
	return byID + ` UNION ALL ` + byID + ` UNION ALL ` + columns + definitionKinds + ` AND operation_id = ?`
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

// checkAuditRow refuses a row the trail would not show as written: an
// event, or one it carries, that checkTrailID refuses; a carried event of
// another operation, site or node than its head (the row stores them
// once), or that carries events itself.
func checkAuditRow(e AuditEvent) error {
	if err := checkTrailID(e); err != nil {
		return err
	}
	for _, c := range e.Carries {
		if c.OperationID != e.OperationID || c.Kind != e.Kind || c.SiteID != e.SiteID || c.SourceNode != e.SourceNode ||
			len(c.Carries) > 0 {
			return fmt.Errorf("audit event %q carried by %q: a carried event shares its head's operation, kind, site and node and carries none",
				c.EventID, e.EventID)
		}
		if err := checkTrailID(c); err != nil {
			return err
		}
	}
	return nil
}

// firstByEventID keeps the first event of each id, in order: SQL Server's
// MERGE would insert both copies of an id new to the table, and a trail
// lists an event once.
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

func auditArgs(args []any, e AuditEvent) ([]any, error) {
	carried, err := encodeCarried(e)
	if err != nil {
		return nil, err
	}
	return append(args, e.EventID, e.OperationID, e.Kind, e.SiteID, string(e.Event), string(e.Status),
		truncate(e.Detail, maxAuditText), truncate(e.Operator, maxAuditOperator), truncate(e.Reason, maxAuditText), utc(e.At),
		sql.NullString{String: e.SourceNode, Valid: e.SourceNode != ""}, carried), nil
}

// encodeCarried is the carried column of e's row: NULL when it carries no
// event, as on the rows written before the column existed. Carried texts
// are cut like the columns'.
func encodeCarried(e AuditEvent) (sql.NullString, error) {
	if len(e.Carries) == 0 {
		return sql.NullString{}, nil
	}
	carried := make([]carriedEvent, len(e.Carries))
	for i, c := range e.Carries {
		carried[i] = carriedEvent{EventID: c.EventID, Event: string(c.Event), Status: string(c.Status),
			Detail: truncate(c.Detail, maxAuditText), Operator: truncate(c.Operator, maxAuditOperator),
			Reason: truncate(c.Reason, maxAuditText), At: utc(c.At)}
	}
	encoded, err := json.Marshal(carried)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("encode the events %q carries: %w", e.EventID, err)
	}
	return sql.NullString{String: string(encoded), Valid: true}, nil
}

func scanAuditEvent(row scanner) (AuditEvent, error) {
	var e AuditEvent
	var event, status string
	var node, carried sql.NullString
	err := row.Scan(&e.EventID, &e.OperationID, &e.Kind, &e.SiteID, &event, &status, &e.Detail, &e.Operator, &e.Reason, &e.At, &node, &carried)
	if err != nil {
		return AuditEvent{}, err
	}
	e.Event, e.Status, e.At, e.SourceNode = AuditEventType(event), contract.Status(status), e.At.UTC(), node.String
	if carried.Valid {
		if e.Carries, err = decodeCarried(e, carried.String); err != nil {
			return AuditEvent{}, err
		}
	}
	return e, nil
}

// decodeCarried is the events head's row carries, from its carried column.
func decodeCarried(head AuditEvent, column string) ([]AuditEvent, error) {
	var carried []carriedEvent
	if err := json.Unmarshal([]byte(column), &carried); err != nil {
		return nil, fmt.Errorf("decode the events %q carries: %w", head.EventID, err)
	}
	out := make([]AuditEvent, len(carried))
	for i, c := range carried {
		out[i] = AuditEvent{EventID: c.EventID, OperationID: head.OperationID, Kind: head.Kind, SiteID: head.SiteID,
			SourceNode: head.SourceNode, Event: AuditEventType(c.Event), Status: contract.Status(c.Status),
			Detail: c.Detail, Operator: c.Operator, Reason: c.Reason, At: c.At.UTC()}
	}
	return out, nil
}

// truncate cuts s to at most n characters, on a character boundary.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
