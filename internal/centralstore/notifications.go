package centralstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// NotificationFilter narrows ListNotifications; zero fields match every
// notification.
type NotificationFilter struct {
	// Status is one status, or "" for any.
	Status contract.Status
	Type   string
	Site   string
	List   string
	// CreatedFrom and CreatedTo bound when central got it: [from, to).
	CreatedFrom, CreatedTo time.Time
	// Query is a word of the subject.
	Query string
	// StuckOnly keeps Pending and Retrying notifications older than
	// StuckAge at Now.
	StuckOnly bool
	Now       time.Time
	StuckAge  time.Duration
	// After continues from the end of a previous page (its Next).
	After *Cursor
	// Limit is the page size; 50 when 0, at most 1000.
	Limit int
}

// Cursor is where a page of notifications (or of calls) ended. Pages go
// newest first by (created_at, id), so the next page is a seek on the index,
// as fast at the millionth row as at the first (no OFFSET).
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// String is the cursor as a URL- and shell-safe token.
func (c Cursor) String() string { return c.CreatedAt.UTC().Format(time.RFC3339Nano) + "_" + c.ID }

// token is c as the next page's token, "" for none.
func (c *Cursor) token() string {
	if c == nil {
		return ""
	}
	return c.String()
}

// ParseCursor reads a Cursor.String token.
func ParseCursor(s string) (Cursor, error) {
	at, id, ok := strings.Cut(s, "_")
	t, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil || !contract.IsOperationID(id) {
		return Cursor{}, fmt.Errorf("%w: page token %q is not one this store wrote (ask for the first page again)", ErrInvalidFilter, s)
	}
	return Cursor{CreatedAt: t.UTC(), ID: id}, nil
}

// NotificationPage is one page of ListNotifications.
type NotificationPage struct {
	Notifications []Notification `json:"notifications"`
	// Next continues the list; nil on the last page.
	Next *Cursor `json:"-"`
	// NextToken is Next as a token ("" on the last page).
	NextToken string `json:"next,omitempty"`
}

// The page sizes of ListNotifications and ListCalls.
const (
	defaultPageSize = 50
	maxPageSize     = 1000
)

// pageSize is a requested page size within bounds: the default for 0.
func pageSize(limit int) int {
	if limit <= 0 {
		return defaultPageSize
	}
	return min(limit, maxPageSize)
}

// listPage runs a list query newest first (its statement without the
// limit) for one page of limit rows: it reads one row more to know whether
// another page follows, and returns the cursor after the last row shown
// (nil on the last page). Rows is never nil, so JSON says [].
func listPage[T any](ctx context.Context, s *Store, query string, args []any, limit int,
	scan func(scanner) (T, error), cursorOf func(T) Cursor) (rows []T, next *Cursor, err error) {
	rows = []T{}
	err = s.eachRow(ctx, s.reads, query+s.limitClause(), append(args, limit+1), func(r *sql.Rows) error {
		row, err := scan(r)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		return nil
	})
	if err != nil || len(rows) <= limit {
		return rows, nil, err
	}
	rows = rows[:limit]
	c := cursorOf(rows[limit-1])
	return rows, &c, nil
}

// ListNotifications lists the notifications matching f, every status, newest
// first, one page at a time.
func (s *Store) ListNotifications(ctx context.Context, f NotificationFilter) (NotificationPage, error) {
	f.Limit = pageSize(f.Limit)
	where, args, err := notificationWhere(f)
	if err != nil {
		return NotificationPage{}, err
	}
	notifications, next, err := listPage(ctx, s, listNotificationsSQL(where), args, f.Limit, scanNotification,
		func(n Notification) Cursor { return Cursor{CreatedAt: n.CreatedAt, ID: n.NotificationID} })
	if err != nil {
		return NotificationPage{}, fmt.Errorf("list notifications: %w", err)
	}
	return NotificationPage{Notifications: notifications, Next: next, NextToken: next.token()}, nil
}

// listNotificationsSQL is the list query, newest first, before its limit.
func listNotificationsSQL(where string) string {
	return `SELECT ` + notificationReadColumns + ` FROM notifications WHERE ` + where +
		` ORDER BY created_at DESC, notification_id DESC`
}

// checkStatus refuses a status filter that names no status.
func checkStatus(status contract.Status) error {
	if !slices.Contains(contract.CentralStatuses(), status) {
		return fmt.Errorf("%w: status %q is not one of %s", ErrInvalidFilter, status, joinStatuses(contract.CentralStatuses()))
	}
	return nil
}

// notificationWhere is the WHERE clause of f.
func notificationWhere(f NotificationFilter) (string, []any, error) {
	where, args := []string{"1 = 1"}, []any{}
	add := func(cond string, vals ...any) { where, args = append(where, cond), append(args, vals...) }
	if f.Status != "" {
		if err := checkStatus(f.Status); err != nil {
			return "", nil, err
		}
		add("status = ?", string(f.Status))
	}
	if f.StuckOnly {
		add("status IN ('Pending', 'Retrying') AND created_at < ?", f.Now.UTC().Add(-f.StuckAge))
	}
	for _, eq := range []struct{ col, v string }{{"type", f.Type}, {"source_site_id", f.Site}, {"list_name", f.List}} {
		if eq.v != "" {
			add(eq.col+" = ?", eq.v)
		}
	}
	if !f.CreatedFrom.IsZero() {
		add("created_at >= ?", f.CreatedFrom.UTC())
	}
	if !f.CreatedTo.IsZero() {
		add("created_at < ?", f.CreatedTo.UTC())
	}
	if f.Query != "" {
		add(`subject LIKE ? ESCAPE '\'`, "%"+likeEscaper.Replace(f.Query)+"%")
	}
	if f.After != nil {
		// The plain range on created_at lets the index seek to the cursor;
		// the OR alone would make SQLite walk the index from its newest end.
		at := f.After.CreatedAt.UTC()
		add("created_at <= ? AND (created_at < ? OR notification_id < ?)", at, at, f.After.ID)
	}
	return strings.Join(where, " AND "), args, nil
}

// joinStatuses lists statuses for a message.
func joinStatuses(statuses []contract.Status) string {
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
