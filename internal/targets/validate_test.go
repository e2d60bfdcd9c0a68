package targets

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

func testRegistry() *Registry {
	return New(
		map[string]ExternalSystem{"erp": {
			BaseURL: "http://erp.invalid/api",
			Methods: map[string]Method{
				"createOrder": {Verb: "POST", Path: "/orders"},
				"getOrder":    {Verb: "GET", Path: "/orders/{id}"},
			},
			Timeout: 5 * time.Second, MaxRetries: 3, RetryInterval: 2 * time.Minute,
		}},
		map[string]Database{
			"historian": {Driver: DriverSQLite, DSN: "/nowhere/h.db", Timeout: 10 * time.Second, MaxRetries: 0, RetryInterval: 30 * time.Second},
			"odd":       {Driver: "oracle", DSN: "x"},
		},
	)
}

func call(system, method string, params map[string]any) Request {
	return Request{Kind: contract.KindExternalCall, System: system, Method: method, Params: params}
}

func write(conn, sql string, args ...any) Request {
	return Request{Kind: contract.KindDatabaseWrite, Connection: conn, SQL: sql, Args: args}
}

type point struct{ X, Y int }

type named struct {
	Name string `json:"name"`
	note string
}

// cyclic is params holding themselves.
func cyclic() map[string]any {
	m := map[string]any{}
	m["self"] = m
	return m
}

func TestValidate(t *testing.T) {
	t.Parallel()
	r := testRegistry()
	tests := []struct {
		name   string
		req    Request
		field  string
		reason string // substring; "" for a valid request
	}{
		{"valid call", call("erp", "getOrder", map[string]any{"id": 7, "x": "y"}), "", ""},
		{"valid write", write("historian", "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", 1, int8(2), uint64(3), float32(4.5), time.Now(), nil), "", ""},
		{"unknown kind", Request{Kind: "Email"}, "kind", `unknown kind "Email"`},
		{"unknown system", call("crm", "getOrder", nil), "system", `unknown external system "crm"`},
		{"unknown method", call("erp", "deleteOrder", nil), "method", `system "erp" has no method "deleteOrder"`},
		{"missing path param", call("erp", "getOrder", map[string]any{"idx": 1}), "params.id", "missing"},
		{"nil path param", call("erp", "getOrder", map[string]any{"id": nil}), "params.id", "missing"},
		{"param not JSON", call("erp", "createOrder", map[string]any{"f": func() {}}), "params.f", "JSON"},
		{"unknown connection", write("ledger", "INSERT INTO t VALUES (1)"), "connection", `unknown database "ledger"`},
		{"unknown driver", write("odd", "INSERT INTO t VALUES (1)"), "connection", `unknown driver "oracle"`},
		{"empty SQL", write("historian", "  \n"), "sql", "empty"},
		{"bytes arg", write("historian", "INSERT INTO t VALUES (?, ?)", 1, []byte("x")), "args[1]",
			"type []uint8 is not supported: use a string, number, bool, nil or time.Time"},
		{"struct arg", write("historian", "INSERT INTO t VALUES (?)", point{1, 2}), "args[0]", "type targets.point is not supported"},
		{"NaN arg", write("historian", "INSERT INTO t VALUES (?)", math.NaN()), "args[0]", "NaN"},
		{"huge uint arg", write("historian", "INSERT INTO t VALUES (?)", uint64(math.MaxUint64)), "args[0]", "does not fit"},
		{"JSON integer past int64", write("historian", "INSERT INTO t VALUES (?)", json.Number("99999999999999999999")), "args[0]",
			"99999999999999999999 does not fit in an int64: send it as a string"},
		{"JSON integers at the int64 edges", write("historian", "INSERT INTO t VALUES (?, ?)",
			json.Number("9223372036854775807"), json.Number("-9223372036854775808")), "", ""},
		{"JSON exponent is a float", write("historian", "INSERT INTO t VALUES (?)", json.Number("1e30")), "", ""},
		{"JSON number past float64", write("historian", "INSERT INTO t VALUES (?)", json.Number("-1e999")), "args[0]", "-1e999 is out of the range of a float64"},
		{"arg not UTF-8", write("historian", "INSERT INTO t VALUES (?)", "caf\xe9"), "args[0]", "must be valid UTF-8"},
		{"SQL not UTF-8", write("historian", "INSERT INTO t VALUES ('caf\xe9')"), "sql", "must be valid UTF-8"},
		{"param past float64", call("erp", "createOrder", map[string]any{"q": json.Number("1e999")}), "params.q", "out of the range of a float64"},
		{"param under float64", call("erp", "createOrder", map[string]any{"q": json.Number("-2.5e-400")}), "params.q", "out of the range of a float64"},
		{"param zero and tiny", call("erp", "createOrder", map[string]any{"z": json.Number("0e-999"), "t": json.Number("5e-324")}), "", ""},
		{"param too long", call("erp", "createOrder", map[string]any{"q": json.Number("1." + strings.Repeat("0", 63))}), "params.q", "a number of 65 characters is longer than 64"},
		{"param integer past int64", call("erp", "createOrder", map[string]any{"o": []any{json.Number("9223372036854775808")}}), "params.o[0]", "does not fit in an int64"},
		{"param text deep", call("erp", "createOrder", map[string]any{"o": map[string][]string{"lines": {"a", "\xff"}}}), "params.o.lines[1]", "must be valid UTF-8"},
		{"param struct field by its JSON name", call("erp", "createOrder", map[string]any{"p": &named{Name: "\xff"}}), "params.p.name", "must be valid UTF-8"},
		{"param struct field JSON leaves out", call("erp", "createOrder", map[string]any{"p": named{Name: "ok", note: "\xff"}}), "", ""},
		{"param self-encoding values and bytes", call("erp", "createOrder", map[string]any{"at": time.Now(), "raw": []byte("\xff")}), "", ""},
		{"param cycle", call("erp", "createOrder", cyclic()), "params.self", "cannot be encoded as JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := r.Validate(tt.req)
			if tt.reason == "" {
				require.NoError(t, err)
				return
			}
			var inv *InvalidError
			require.ErrorAs(t, err, &inv)
			require.Equal(t, tt.field, inv.Field)
			require.Contains(t, inv.Reason, tt.reason)
			require.Contains(t, err.Error(), tt.field+": ")
		})
	}
}

func TestBytesArgMessage(t *testing.T) {
	t.Parallel()
	err := testRegistry().Validate(write("historian", "INSERT INTO t VALUES (?, ?)", 1, []byte("x")))
	require.EqualError(t, err, "args[1]: type []uint8 is not supported: use a string, number, bool, nil or time.Time")
}

func TestTarget(t *testing.T) {
	t.Parallel()
	r := testRegistry()
	require.Equal(t, "erp.createOrder", r.Target(call("erp", "createOrder", nil)))
	require.Equal(t, "historian", r.Target(write("historian", "x")))
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	r := testRegistry()
	require.Equal(t, contract.RetryPolicy{Interval: 2 * time.Minute, MaxRetries: 3, AttemptTimeout: 35 * time.Second},
		r.Policy(call("erp", "createOrder", nil)))
	// MaxRetries 0 is kept: no retries is a valid choice.
	require.Equal(t, contract.RetryPolicy{Interval: 30 * time.Second, MaxRetries: 0, AttemptTimeout: 40 * time.Second},
		r.Policy(write("historian", "x")))
	def := contract.RetryPolicy{Interval: time.Minute, MaxRetries: 10, AttemptTimeout: 60 * time.Second}
	require.Equal(t, def, r.Policy(call("gone", "createOrder", nil)))
	require.Equal(t, def, r.Policy(write("gone", "x")))
}
