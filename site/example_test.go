package site_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/site/targetcalls"
)

// A script sends a notification: Notify returns once it is on disk, and
// the site daemon hands it to central, which emails the list.
func Example() {
	dir, cleanup := tempDir()
	defer cleanup()
	ctx := context.Background()

	c, err := site.Open(ctx, filepath.Join(dir, "site.db"), site.Options{SiteID: "plant-1", Node: "node-a"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	id, err := c.Notify(ctx, "ops", "Pump 3 tripped", "Pressure low on pump 3 at 14:05.")
	if err != nil {
		log.Fatal(err)
	}
	st, err := c.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Status)
	// Output: Forwarding
}

// A script calls an external system defined in code (no config file): the
// immediate attempt's answer comes back; had the system been down, the call
// would be queued (Pending) and retried at its interval. targetcalls.New
// makes the calls: a script that only notifies leaves it out and links no
// HTTP client.
func ExampleClient_Call() {
	dir, cleanup := tempDir()
	defer cleanup()
	erp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"order":%q,"state":"shipped"}`, r.PathValue("id"))
	}))
	defer erp.Close()
	ctx := context.Background()

	system := site.DefaultExternalSystem()
	system.BaseURL = erp.URL
	system.Methods = map[string]site.Method{"getOrder": {Verb: "GET", Path: "/orders/{id}"}}
	c, err := site.Open(ctx, filepath.Join(dir, "site.db"), site.Options{
		SiteID: "plant-1", Node: "node-a", ExternalSystems: map[string]site.ExternalSystem{"erp": system},
		Calls: targetcalls.New,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	res, err := c.Call(ctx, "erp", "getOrder", map[string]any{"id": "A-17"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.HTTPStatus)
	// Output: Delivered 200
}

// A script writes a row to a database defined in code. The statement is
// one parameterised INSERT, UPDATE or DELETE; a locked or missing database
// would queue the write for retry instead.
func ExampleClient_Write() {
	dir, cleanup := tempDir()
	defer cleanup()
	historian := filepath.Join(dir, "historian.db")
	createTable(historian)
	ctx := context.Background()

	db := site.DefaultDatabase()
	db.DSN = historian
	c, err := site.Open(ctx, filepath.Join(dir, "site.db"), site.Options{
		SiteID: "plant-1", Node: "node-a", Databases: map[string]site.Database{"historian": db},
		Calls: targetcalls.New,
	})
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

// Every target defined in code is checked as `outpost config check` checks
// the file's, and Open says what is wrong, where.
func ExampleOpen_badTarget() {
	dir, cleanup := tempDir()
	defer cleanup()
	system := site.DefaultExternalSystem()
	system.BaseURL = "erp.local"
	_, err := site.Open(context.Background(), filepath.Join(dir, "site.db"), site.Options{
		SiteID: "plant-1", ExternalSystems: map[string]site.ExternalSystem{"erp": system}, Calls: targetcalls.New,
	})
	fmt.Println(err)
	// Output:
	// site options: 2 problem(s):
	//   external_systems.erp.base_url: "erp.local" must be an http:// or https:// URL
	//   external_systems.erp.methods: at least one method is required, e.g. createOrder: {verb: POST, path: /orders}
}

func tempDir() (string, func()) {
	dir, err := os.MkdirTemp("", "outpost-example")
	if err != nil {
		log.Fatal(err)
	}
	return dir, func() { os.RemoveAll(dir) }
}

// createTable makes the historian's table, as the plant's database has.
func createTable(path string) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE readings (tag TEXT, value REAL)`); err != nil {
		log.Fatal(err)
	}
}
