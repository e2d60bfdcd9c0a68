package sitedaemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/site"
)

// inputSite is the site API over a client with the erp system and the
// historian database (table readings), and a handle on that database.
func inputSite(t *testing.T) (http.Handler, *site.Client, *sql.DB) {
	t.Helper()
	dir := t.TempDir()
	historian := filepath.Join(dir, "historian.db")
	db, err := sql.Open("sqlite", historian)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(`CREATE TABLE readings (tag TEXT, value INTEGER)`)
	require.NoError(t, err)
	cfg := siteDefinitions("http://127.0.0.1:1", historian)
	cfg.Store = filepath.Join(dir, "site.db")
	c := openSite(t, cfg)
	return NewAPI(c, APIOptions{}, zaptest.NewLogger(t)), c, db
}

// requireRefused asserts a 400 whose error mentions what, and that the
// site tracked and buffered nothing.
func requireRefused(t *testing.T, h http.Handler, c *site.Client, path, body, mentions string) {
	t.Helper()
	code, answer := postJSON(t, h, path, body)
	require.Equal(t, http.StatusBadRequest, code, "%s: %s", body, answer)
	var e ErrorBody
	require.NoError(t, json.Unmarshal([]byte(answer), &e), answer)
	require.Contains(t, e.Error, mentions, body)
	rows, err := c.Tracking().List(context.Background())
	require.NoError(t, err)
	require.Empty(t, rows, "nothing is tracked for %s", body)
	depth, err := c.BufferDepth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth, "nothing is buffered for %s", body)
}

// A write whose placeholders its arguments cannot fill is refused at once:
// arguments are a list, bound by position, so a named placeholder (which
// the driver binds only by name) is never filled, whatever the count. It
// was tracked, retried and parked "missing named argument".
func TestPostWriteRefusesPlaceholdersItCannotBind(t *testing.T) {
	t.Parallel()
	h, c, db := inputSite(t)
	for _, tc := range []struct{ sql, args, mentions string }{
		{`INSERT INTO readings (tag, value) VALUES (:a, :b)`, `["t", 1]`, "sql: :a names its argument"},
		{`INSERT INTO readings (tag, value) VALUES (:a, :b)`, `["t"]`, "sql: :a names its argument"},
		{`INSERT INTO readings (tag, value) VALUES (@a, @b)`, `["t"]`, "sql: @a names its argument"},
		{`INSERT INTO readings (tag, value) VALUES ($a, $b)`, `["t"]`, "sql: $a names its argument"},
		{`INSERT INTO readings (tag, value) VALUES (?, :b)`, `["t"]`, "sql: :b names its argument"},
		{`INSERT INTO readings (tag, value) VALUES ($1, $2)`, `["t"]`, "args: the statement takes 2 argument(s) and 1 were given"},
	} {
		requireRefused(t, h, c, "/v1/writes", `{"connection":"historian","sql":"`+tc.sql+`","args":`+tc.args+`}`, tc.mentions)
	}

	// Placeholder-like text in a literal or a comment is data, not a placeholder.
	code, body := postJSON(t, h, "/v1/writes", `{"connection":"historian","sql":"INSERT INTO readings (tag, value) VALUES (?, 1) -- :c\n","args":[":a @b $c ?"]}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = postJSON(t, h, "/v1/writes", `{"connection":"historian","sql":"INSERT INTO readings (tag, value) VALUES (':a @b $c ?', $1)","args":[2]}`)
	require.Equal(t, http.StatusOK, code, body)
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM readings WHERE tag = ':a @b $c ?'`).Scan(&n))
	require.Equal(t, 2, n)
}
