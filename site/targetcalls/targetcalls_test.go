package targetcalls_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/site/targetcalls"
)

// A script opens the site of the daemon's config file: its store, its
// identity and its databases, and writes a row to one.
func ExampleOpenConfig() {
	dir, err := os.MkdirTemp("", "outpost-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	historian := filepath.Join(dir, "historian.db")
	if err := createReadings(historian); err != nil {
		log.Fatal(err)
	}
	file := filepath.Join(dir, "outpost.yaml")
	yaml := fmt.Sprintf("site:\n  id: plant-1\n  store: %s\n  databases:\n    historian: {dsn: %s}\n", filepath.Join(dir, "site.db"), historian)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	c, err := targetcalls.OpenConfig(ctx, file, site.Options{Script: "readings.go"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := c.Write(ctx, "historian", "INSERT INTO readings (tag, value) VALUES (?, ?)", "pump-3.pressure", 1.7)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, *res.RowsAffected, "row")
	// Output: Delivered 1 row
}

// The file's site section fills what Options leaves zero; what Options
// sets stands.
func TestOpenConfigTakesTheFilesSiteWhereOptionsLeaveIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "outpost.yaml")
	yaml := fmt.Sprintf("site:\n  id: plant-1\n  node: node-a\n  store: %s\n  max_body_bytes: 2048\n", filepath.Join(dir, "site.db"))
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o600))

	c, err := targetcalls.OpenConfig(t.Context(), file, site.Options{})
	require.NoError(t, err)
	require.Equal(t, 2048, c.MaxBodyBytes())
	id, err := c.Notify(t.Context(), "ops", "Pump 3 tripped", "Pressure low.")
	require.NoError(t, err)
	st, err := c.Status(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, id, st.NotificationID, "the file named the site: Notify needs its id")
	require.NoError(t, c.Close())

	c, err = targetcalls.OpenConfig(t.Context(), file, site.Options{MaxBodyBytes: 512})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.Equal(t, 512, c.MaxBodyBytes())
}

// A file that fails `outpost config check` opens nothing.
func TestOpenConfigRefusesABadFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "outpost.yaml")
	require.NoError(t, os.WriteFile(file, []byte("site:\n  id: plant 1\n  store: site.db\n"), 0o600))
	_, err := targetcalls.OpenConfig(t.Context(), file, site.Options{})
	require.ErrorContains(t, err, "site.id")
}

// createReadings makes the historian's table, as the plant's database has.
func createReadings(path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE readings (tag TEXT, value REAL)`)
	return err
}
