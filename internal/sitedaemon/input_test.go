package sitedaemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
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

// Text that is not valid UTF-8, as raw bytes or as a lone UTF-16
// surrogate escape, is refused with a 400 naming the field: decoding
// would quietly replace it with U+FFFD, and the site would mail or store
// other text than was sent. A NUL in a subject (a mail header) likewise.
func TestPostRefusesInvalidText(t *testing.T) {
	t.Parallel()
	h, c, _ := inputSite(t)
	for _, tc := range []struct{ path, body, mentions string }{
		{"/v1/notifications", "{\"list\":\"ops\",\"subject\":\"Pump \xff\"}", "subject: must be valid UTF-8"},
		{"/v1/notifications", "{\"list\":\"ops\",\"subject\":\"s\",\"body\":\"caf\xc3\"}", "body: must be valid UTF-8"},
		{"/v1/notifications", "{\"list\":\"o\xffps\",\"subject\":\"s\"}", "list: must be valid UTF-8"},
		{"/v1/notifications", "{\"list\":\"ops\",\"subject\":\"s\",\"instance\":\"\xed\xa0\x80\"}", "instance: must be valid UTF-8"},
		{"/v1/notifications", "{\"list\":\"ops\",\"subject\":\"s\",\"script\":\"\xc0\xaf\"}", "script: must be valid UTF-8"},
		{"/v1/notifications", "{\"list\":\"ops\",\"subject\":\"s\",\"idempotencyKey\":\"k\xff\"}", "idempotencyKey: must be valid UTF-8"},
		{"/v1/notifications", `{"list":"ops","subject":"Pump \udc00"}`, `subject: must be valid UTF-8 (\udc00 is half of a UTF-16 surrogate pair`},
		{"/v1/notifications", `{"list":"ops","subject":"s","body":"\ud83dx"}`, `body: must be valid UTF-8 (\ud83d is half of a UTF-16 surrogate pair`},
		{"/v1/notifications", `{"list":"ops","subject":"s","body":"\ud83d\ud83d"}`, `body: must be valid UTF-8 (\ud83d is half of a UTF-16 surrogate pair`},
		{"/v1/notifications", `{"list":"ops","subject":"Pump\u0000 3"}`, "subject: must not contain a NUL character"},
		{"/v1/calls", "{\"system\":\"erp\",\"method\":\"getOrder\",\"params\":{\"id\":\"7\xff\"}}", "params.id: must be valid UTF-8"},
		{"/v1/calls", "{\"system\":\"erp\",\"method\":\"getOrder\",\"params\":{\"id\":\"7\",\"o\":{\"lines\":[\"a\",\"\xff\"]}}}", "params.o.lines[1]: must be valid UTF-8"},
		{"/v1/calls", "{\"system\":\"erp\",\"method\":\"getOrder\",\"params\":{\"id\":\"7\",\"n\xffme\":1}}", "params: a field name must be valid UTF-8"},
		{"/v1/calls", "{\"system\":\"e\xffrp\",\"method\":\"getOrder\"}", "system: must be valid UTF-8"},
		{"/v1/writes", "{\"connection\":\"historian\",\"sql\":\"INSERT INTO readings (tag) VALUES ('\xff')\"}", "sql: must be valid UTF-8"},
		{"/v1/writes", `{"connection":"historian","sql":"INSERT INTO readings (tag) VALUES ('\udfff')"}`, `sql: must be valid UTF-8 (\udfff is half of a UTF-16 surrogate pair`},
		{"/v1/writes", "{\"connection\":\"historian\",\"sql\":\"INSERT INTO readings (tag) VALUES (?)\",\"args\":[\"\xff\"]}", "args[0]: must be valid UTF-8"},
	} {
		requireRefused(t, h, c, tc.path, tc.body, tc.mentions)
	}

	// A surrogate pair is one character; U+FFFD sent as itself is text.
	code, body := postJSON(t, h, "/v1/notifications", `{"list":"ops","subject":"Pump \ud83d\ude00 \ufffd �"}`)
	require.Equal(t, http.StatusAccepted, code, body)
}

// A number in call params that no float64 holds (1e999999, a 5000-digit
// integer) or an integer past int64 is refused with a 400 naming it before
// anything is tracked: it was tracked, then failed (502) when the call's
// body could not be encoded, or sent rounded.
func TestPostCallRefusesNumbersThatDoNotFit(t *testing.T) {
	t.Parallel()
	h, c, _ := inputSite(t)
	call := func(params string) string {
		return `{"system":"erp","method":"getOrder","params":{"id":"7",` + params + `}}`
	}
	for _, tc := range []struct{ body, mentions string }{
		{call(`"qty":1e999999`), "params.qty: 1e999999 is out of the range of a float64"},
		{call(`"qty":-1e400`), "params.qty: -1e400 is out of the range of a float64"},
		{call(`"qty":1e-400`), "params.qty: 1e-400 is out of the range of a float64"},
		{call(`"qty":` + strings.Repeat("9", 5000)), "params.qty: a number of 5000 characters"},
		{call(`"qty":0.` + strings.Repeat("1", 70)), "params.qty: a number of 72 characters"},
		{call(`"ref":12345678901234567890`), "params.ref: 12345678901234567890 does not fit in an int64: send it as a string"},
		{call(`"lines":[{"qty":1},{"qty":1e999}]`), "params.lines[1].qty: 1e999 is out of the range of a float64"},
		{`{"connection":"historian","sql":"INSERT INTO readings (value) VALUES (?)","args":[1e999999]}`, "args[0]: 1e999999 is out of the range of a float64"},
	} {
		path := "/v1/calls"
		if strings.Contains(tc.body, "connection") {
			path = "/v1/writes"
		}
		requireRefused(t, h, c, path, tc.body, tc.mentions)
	}
}

// A key given twice in one object, at any depth, is refused: decoding
// would keep the last and drop the first, and two values for sql or list
// in one request are an attack or a bug.
func TestPostRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	h, c, _ := inputSite(t)
	for _, tc := range []struct{ path, body, mentions string }{
		{"/v1/notifications", `{"list":"ops","subject":"s","list":"all"}`, `list: given twice`},
		{"/v1/writes", `{"connection":"historian","sql":"DELETE FROM readings WHERE tag = 'x'","sql":"DELETE FROM readings"}`, `sql: given twice`},
		{"/v1/writes", `{"connection":"historian","s\u0071l":"DELETE FROM readings WHERE tag = 'x'","sql":"DELETE FROM readings"}`, `sql: given twice`},
		{"/v1/calls", `{"system":"erp","method":"getOrder","params":{"id":"7","id":"8"}}`, `params.id: given twice`},
		{"/v1/calls", `{"system":"erp","method":"getOrder","params":{"id":"7","o":[{"a":1},{"a":1,"a":2}]}}`, `params.o[1].a: given twice`},
	} {
		requireRefused(t, h, c, tc.path, tc.body, tc.mentions)
	}
}
