package targets

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 4, 5, 6, 7, 890123456, time.FixedZone("CET", 3600))
	in := Request{
		Kind:       contract.KindDatabaseWrite,
		Connection: "historian",
		SQL:        "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		Args:       []any{int64(9007199254740993), 42, uint16(7), 2.5, "O'Brien", true, nil, at},
	}
	b, err := Encode(in)
	require.NoError(t, err)
	out, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, in.Kind, out.Kind)
	require.Equal(t, in.Connection, out.Connection)
	require.Equal(t, in.SQL, out.SQL)
	// int64 past float64's exact range survives: numbers are not read as float64.
	require.Equal(t, []any{
		int64(9007199254740993), int64(42), int64(7), 2.5, "O'Brien", true, nil, at.Format(time.RFC3339Nano),
	}, out.Args)
}

func TestDecodeParamsNumbersDeep(t *testing.T) {
	t.Parallel()
	in := Request{
		Kind: contract.KindExternalCall, System: "erp", Method: "createOrder",
		Params: map[string]any{"id": 17, "qty": 1.25, "lines": []any{map[string]any{"n": 3}}},
	}
	b, err := Encode(in)
	require.NoError(t, err)
	out, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"id": int64(17), "qty": 1.25, "lines": []any{map[string]any{"n": int64(3)}},
	}, out.Params)
}

func TestEncodeRefusesWhatCannotComeBack(t *testing.T) {
	t.Parallel()
	_, err := Encode(Request{Kind: contract.KindDatabaseWrite, SQL: "x", Args: []any{"a", []byte("b")}})
	var inv *InvalidError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "args[1]", inv.Field)

	_, err = Encode(Request{Kind: contract.KindExternalCall, Params: map[string]any{"ch": make(chan int)}})
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "params.ch", inv.Field)
}

func TestDecodeRejectsBadPayloads(t *testing.T) {
	t.Parallel()
	for _, p := range []string{``, `{`, `{"kind":"ExternalCall"} {}`, `[]`} {
		_, err := Decode([]byte(p))
		require.Error(t, err, p)
	}
}

func TestResultJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Result{HTTPStatus: 201, Body: json.RawMessage(`{"id":1}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"httpStatus":201,"body":{"id":1}}`, string(b))
}
