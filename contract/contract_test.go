package contract_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/outpost-dev/outpost/contract"
)

// A summary fits the server's limit on the payload it becomes (400 bytes by
// default), whatever the subject: long, multi-byte, or full of characters
// JSON escapes.
func TestSummaryFitsTheServersLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		// wantLen is the summary's length in bytes.
		wantLen int
	}{
		{"short, unchanged", "Notify ops: Pump 3 tripped", 26},
		{"exactly the limit, unchanged", strings.Repeat("a", contract.MaxSummaryBytes), contract.MaxSummaryBytes},
		{"long ASCII, cut to the limit", "Notify ops: " + strings.Repeat("pressure low ", 40), contract.MaxSummaryBytes},
		// 61 three-byte runes and the ellipsis: a 62nd would pass 200.
		{"multi-byte, cut between runes", "Notify ops: " + strings.Repeat("€", 100), 12 + 61*3 + 3},
		// '<' encodes as \u003c: six bytes each.
		{"escaped characters count as encoded", strings.Repeat("<", 100), 32 + 3},
	}
	for _, c := range cases {
		got := contract.Summary(c.in)
		require.Len(t, got, c.wantLen, c.name)
		require.True(t, utf8.ValidString(got), c.name)
		if got != c.in {
			require.True(t, strings.HasSuffix(got, "…"), c.name)
			require.True(t, strings.HasPrefix(c.in, strings.TrimSuffix(got, "…")), c.name)
		}
		payload, err := converter.GetDefaultDataConverter().ToPayload(got)
		require.NoError(t, err, c.name)
		require.LessOrEqual(t, len(payload.GetData()), contract.MaxSummaryBytes+2, c.name) // the JSON quotes
		require.LessOrEqual(t, proto.Size(payload), 400, c.name)
	}
}

// Only the canonical spelling names an operation: the other forms the uuid
// package reads would let one operation answer to several ids.
func TestIsOperationID(t *testing.T) {
	t.Parallel()
	require.True(t, contract.IsOperationID("343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11"))
	for _, id := range []string{
		"", "not-a-uuid", "{343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11}", "urn:uuid:343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11",
		"343ebf6c0e5d4c4e9a4e2b0d7f1f2a11", "343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a1g", "343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a111", "343ebf6c-0e5d-4c4e-9a4e+2b0d7f1f2a11", "343EBF6C-0E5D-4C4E-9A4E-2B0D7F1F2A11", " 343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11",
	} {
		require.False(t, contract.IsOperationID(id), id)
	}
}

// An id derived from an idempotency key is the version 5 UUID the uuid
// package makes of the same namespace and name: ids made before the
// contract computed it itself stay the same.
func TestIdempotentOperationIDIsUUID5(t *testing.T) {
	t.Parallel()
	namespace := uuid.MustParse("6f0b3a52-9d3e-4c8a-b1f4-2a7d5e9c0b61")
	for _, c := range [][3]string{
		{"plant-1", contract.KindNotification, "trip-42"},
		{"plant-1", contract.KindExternalCall, "trip-42"},
		{"", "", ""},
		{"site-ü", contract.KindDatabaseWrite, strings.Repeat("k", 500)},
	} {
		want := uuid.NewSHA1(namespace, []byte(c[0]+"\x00"+c[1]+"\x00"+c[2])).String()
		got := contract.IdempotentOperationID(c[0], c[1], c[2])
		require.Equal(t, want, got, "%q", c)
		require.True(t, contract.IsOperationID(got), got)
	}
}

// Every id the uuid package makes is an operation id.
func TestIsOperationIDTakesGeneratedIDs(t *testing.T) {
	t.Parallel()
	for range 100 {
		require.True(t, contract.IsOperationID(uuid.Must(uuid.NewV7()).String()))
		require.True(t, contract.IsOperationID(uuid.NewString()))
	}
	require.True(t, contract.IsOperationID(uuid.Nil.String()))
}

// Only Outpost's build ids name a generation; anything else is 0, as a
// worker before generation 2 (the SDK's binary checksum) is.
func TestCentralGeneration(t *testing.T) {
	for id, want := range map[string]int{
		"outpost-workflows-3":              3,
		"outpost-workflows-12":             12,
		"":                                 0,
		"aa47428fb6ac0ff8a7ae231f5b24c072": 0,
		"outpost-workflows-":               0,
		"outpost-workflows-3x":             0,
		"my-outpost-workflows-3":           0,
	} {
		if got := contract.CentralGeneration(id); got != want {
			t.Errorf("CentralGeneration(%q) = %d, want %d", id, got, want)
		}
	}
}

// Statuses lists every Status constant the package declares, and
// CentralStatuses all of them but the site-only Exported.
func TestStatusesListsEveryStatus(t *testing.T) {
	t.Parallel()
	files, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	var declared []contract.Status
	for _, file := range files["contract"].Files {
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if typ, ok := vs.Type.(*ast.Ident); ok && typ.Name == "Status" {
					for _, v := range vs.Values {
						s, err := strconv.Unquote(v.(*ast.BasicLit).Value)
						require.NoError(t, err)
						declared = append(declared, contract.Status(s))
					}
				}
			}
		}
	}
	require.Len(t, declared, 8, "the Status constants this test found")
	require.ElementsMatch(t, declared, contract.Statuses())
	require.ElementsMatch(t, slices.DeleteFunc(declared, func(s contract.Status) bool { return s == contract.StatusExported }), contract.CentralStatuses())
}
