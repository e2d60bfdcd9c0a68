package site

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
		ExternalSystems: map[string]ExternalSystem{"erp": erp}, Databases: map[string]Database{"historian": hist}})
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
