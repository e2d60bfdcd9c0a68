package site

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
)

// newTargetsClient is a client with the erp system and the historian
// database (table readings).
func newTargetsClient(t *testing.T) *Client {
	t.Helper()
	dir := t.TempDir()
	historian := filepath.Join(dir, "historian.db")
	db, err := sql.Open("sqlite", historian)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE readings (tag TEXT, value INTEGER)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	erp := DefaultExternalSystem()
	erp.BaseURL = "http://127.0.0.1:1"
	erp.Methods = map[string]Method{"getOrder": {Verb: "GET", Path: "/orders/{id}"}}
	hist := DefaultDatabase()
	hist.DSN = historian
	c, err := Open(context.Background(), filepath.Join(dir, "site.db"), Options{SiteID: "plant-1", Node: "node-a",
		ExternalSystems: map[string]ExternalSystem{"erp": erp}, Databases: map[string]Database{"historian": hist},
		Calls: func(reg *targets.Registry) Executor { return targetexec.New(reg) }})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// requireInvalid asserts err is an *InvalidError naming field, and that
// nothing was tracked or buffered.
func requireInvalid(t *testing.T, c *Client, err error, field, mentions string) {
	t.Helper()
	var invalid *InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, field, invalid.Field, err.Error())
	require.Contains(t, invalid.Reason, mentions)
	requireNothingStored(t, c)
}

// requireNothingStored asserts c tracked and buffered nothing.
func requireNothingStored(t *testing.T, c *Client) {
	t.Helper()
	rows, err := c.Tracking().List(context.Background())
	require.NoError(t, err)
	require.Empty(t, rows)
	depth, err := c.BufferDepth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth)
}

// Write refuses a named placeholder: its arguments are bound by position,
// so the driver would never fill it.
func TestWriteRefusesPlaceholdersItCannotBind(t *testing.T) {
	t.Parallel()
	c := newTargetsClient(t)
	for _, sql := range []string{
		`INSERT INTO readings (tag, value) VALUES (:a, :b)`,
		`INSERT INTO readings (tag, value) VALUES (@a, ?)`,
		`INSERT INTO readings (tag, value) VALUES ($a, ?)`,
		`INSERT INTO readings (tag, value) VALUES (?, :b)`,
	} {
		_, err := c.Write(context.Background(), "historian", sql, "t", 1)
		requireInvalid(t, c, err, "sql", "names its argument")
	}
}

// Text that is not valid UTF-8 is refused naming the field: encoding it
// would replace it with U+FFFD, and the site would mail or store other
// text than the script gave. A NUL in a subject (a mail header) likewise.
func TestInvalidTextIsRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	c := newTargetsClient(t)
	ctx := context.Background()
	_, err := c.Notify(ctx, "o\xffps", "s", "b")
	requireInvalid(t, c, err, "list", "must be valid UTF-8")
	_, err = c.Notify(ctx, "ops", "Pump\x00 3", "b")
	requireInvalid(t, c, err, "subject", "must not contain a NUL character")
	_, err = c.Call(ctx, "erp", "getOrder", map[string]any{"id": "7\xff"})
	requireInvalid(t, c, err, "params.id", "must be valid UTF-8")
	_, err = c.Call(ctx, "erp", "getOrder", map[string]any{"id": "7", "o": map[string]any{"lines": []any{"a", "\xff"}}})
	requireInvalid(t, c, err, "params.o.lines[1]", "must be valid UTF-8")
	_, err = c.Call(ctx, "erp", "getOrder", map[string]any{"id": "7", "lines": []string{"\xff"}})
	requireInvalid(t, c, err, "params.lines[0]", "must be valid UTF-8")
	_, err = c.Call(ctx, "erp", "getOrder", map[string]any{"id": "7", "n\xffme": 1})
	requireInvalid(t, c, err, "params", "a field name must be valid UTF-8")
	_, err = c.Call(ctx, "erp", "getOrder", map[string]any{"id": "7", "o": map[string]string{"n\xffme": "x"}})
	requireInvalid(t, c, err, "params.o", "a field name must be valid UTF-8")
	_, err = c.Write(ctx, "historian", "INSERT INTO readings (tag) VALUES ('\xff')")
	requireInvalid(t, c, err, "sql", "must be valid UTF-8")
	_, err = c.Write(ctx, "historian", "INSERT INTO readings (tag) VALUES (?)", "\xff")
	requireInvalid(t, c, err, "args[0]", "must be valid UTF-8")
}

// A number in call params that does not fit (out of float64's range, an
// integer past int64, absurdly long) is refused naming it before anything
// is tracked: it was tracked, then failed, or was sent rounded.
func TestCallParamsNumbersMustFit(t *testing.T) {
	t.Parallel()
	c := newTargetsClient(t)
	for _, tc := range []struct {
		params          map[string]any
		field, mentions string
	}{
		{map[string]any{"qty": json.Number("1e999999")}, "params.qty", "1e999999 is out of the range of a float64"},
		{map[string]any{"qty": json.Number(strings.Repeat("9", 5000))}, "params.qty", "a number of 5000 characters"},
		{map[string]any{"ref": uint64(math.MaxUint64)}, "params.ref", "18446744073709551615 does not fit in an int64"},
		{map[string]any{"lines": []any{map[string]any{"qty": json.Number("1e400")}}}, "params.lines[0].qty", "1e400 is out of the range of a float64"},
	} {
		tc.params["id"] = "7"
		_, err := c.Call(context.Background(), "erp", "getOrder", tc.params)
		requireInvalid(t, c, err, tc.field, tc.mentions)
	}
}
