package centralstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// CallFilter narrows ListCalls; zero fields match every call and write.
type CallFilter struct {
	// Status is one status, or "" for any.
	Status contract.Status
	// Kind is contract.KindExternalCall or KindDatabaseWrite, or "" for both.
	Kind string
	Site string
	// Target is a call's "system.method" or a write's database name, exactly.
	Target string
	// CreatedFrom and CreatedTo bound when the site made it: [from, to).
	CreatedFrom, CreatedTo time.Time
	// After continues from the end of a previous page (its Next).
	After *Cursor
	// Limit is the page size; 50 when 0, at most 1000.
	Limit int
}

// CallPage is one page of ListCalls.
type CallPage struct {
	Calls []contract.TrackedOperation `json:"calls"`
	// Next continues the list; nil on the last page.
	Next *Cursor `json:"-"`
	// NextToken is Next as a token ("" on the last page).
	NextToken string `json:"next,omitempty"`
}

// ListCalls lists central's copy of the sites' cached calls and database
// writes matching f, every status, newest first by (created_at,
// operation_id), one page at a time: each page is a seek on an index, as
// fast at the ten-millionth row as at the first.
func (s *Store) ListCalls(ctx context.Context, f CallFilter) (CallPage, error) {
	f.Limit = pageSize(f.Limit)
	where, args, err := callWhere(f)
	if err != nil {
		return CallPage{}, err
	}
	calls, next, err := listPage(ctx, s, listCallsSQL(where), args, f.Limit, scanSiteCall,
		func(c contract.TrackedOperation) Cursor { return Cursor{CreatedAt: c.CreatedAt, ID: c.OperationID} })
	if err != nil {
		return CallPage{}, fmt.Errorf("list calls: %w", err)
	}
	return CallPage{Calls: calls, Next: next, NextToken: next.token()}, nil
}

// listCallsSQL is the list query, newest first, before its limit.
func listCallsSQL(where string) string {
	return `SELECT ` + strings.Join(trackedColumns, ", ") + ` FROM site_calls WHERE ` + where +
		` ORDER BY created_at DESC, operation_id DESC`
}

// callWhere is the WHERE clause of f. Each equality filter but the kind
// leads an index that goes on with (created_at, …), and no filter at all
// reads site_calls_created: the page is a range of one index in its order.
// The kind is checked on the rows read (two kinds share the table).
func callWhere(f CallFilter) (string, []any, error) {
	where, args := []string{"1 = 1"}, []any{}
	add := func(cond string, vals ...any) { where, args = append(where, cond), append(args, vals...) }
	if f.Status != "" {
		if err := checkStatus(f.Status); err != nil {
			return "", nil, err
		}
		add("status = ?", string(f.Status))
	}
	if f.Kind != "" {
		if !slices.Contains(contract.CallKinds(), f.Kind) {
			return "", nil, fmt.Errorf("%w: kind %q is not one of %s", ErrInvalidFilter, f.Kind, strings.Join(contract.CallKinds(), ", "))
		}
		add("kind = ?", f.Kind)
	}
	for _, eq := range []struct{ col, v string }{{"source_site_id", f.Site}, {"target", f.Target}} {
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
	if f.After != nil {
		// The plain range on created_at lets the index seek to the cursor,
		// as in notificationWhere.
		at := f.After.CreatedAt.UTC()
		add("created_at <= ? AND (created_at < ? OR operation_id < ?)", at, at, f.After.ID)
	}
	return strings.Join(where, " AND "), args, nil
}
