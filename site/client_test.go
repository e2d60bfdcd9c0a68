package site

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

func newTestClient(t *testing.T) *Client {
	t.Helper()
	c, err := Open(context.Background(), filepath.Join(t.TempDir(), "site.db"),
		Options{SiteID: "plant-1", Node: "node-a", MaxBodyBytes: 1024})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// The SDK's Notify returns only after the row is committed.
func TestNotifyReturnsIDOfCommittedRow(t *testing.T) {
	t.Parallel()
	c := newTestClient(t)
	id, err := c.Notify(context.Background(), "ops", "subject", "body")
	require.NoError(t, err)
	st, err := c.Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, contract.StatusForwarding, st.Status)
	_, err = c.Notify(context.Background(), "", "subject", "body")
	var invalid *InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "list", invalid.Field)
}

func TestUnknownIDsAreRememberedForAWhileAndBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	u := newUnknownIDs(func() time.Time { return now })
	u.add("a")
	require.True(t, u.has("a"))
	require.False(t, u.has("b"))
	now = now.Add(unknownTTL)
	require.False(t, u.has("a"), "forgotten after the TTL")
	for i := range unknownMax + 5 {
		u.add(fmt.Sprint(i))
	}
	require.LessOrEqual(t, len(u.forgets), unknownMax)
}

func TestOpenRefusesAnEmptySiteID(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "db")
	_, err := Open(context.Background(), path, Options{Node: "node-a"})
	var invalid *InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Contains(t, err.Error(), "SiteID")
	_, statErr := os.Stat(path)
	require.ErrorIs(t, statErr, os.ErrNotExist, "no store is created for a client that cannot work")

	// A node or site id central cannot store (64 characters of a-z0-9._-).
	_, err = Open(context.Background(), path, Options{SiteID: "plant-1", Node: strings.Repeat("n", 65)})
	require.ErrorContains(t, err, "Node: ")
	_, err = Open(context.Background(), path, Options{SiteID: "plant 1"})
	require.ErrorContains(t, err, `SiteID: "plant 1" must be 1-64 letters`)
	_, statErr = os.Stat(path)
	require.ErrorIs(t, statErr, os.ErrNotExist)
}

// Every field is bounded before anything is buffered: a notification the
// site accepts is one central can take (a 3 MB instance was accepted and
// then refused by Temporal at every hand-off, forever).
func TestProvenanceIsBounded(t *testing.T) {
	t.Parallel()
	c := newTestClient(t)
	huge := strings.Repeat("x", 3<<20)
	_, err := c.Send(context.Background(), Notification{List: "ops", Subject: "s", Instance: huge})
	require.ErrorContains(t, err, "instance: longer than 256 characters")
	_, err = c.Send(context.Background(), Notification{List: "ops", Subject: "s", Script: strings.Repeat("é", 257)})
	require.ErrorContains(t, err, "script: longer than 256 characters")
	_, err = c.SendCall(context.Background(), CallRequest{System: "erp", Method: "getOrder", Instance: huge})
	require.ErrorContains(t, err, "instance: longer than 256 characters")
	depth, err := c.BufferDepth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth)

	big, err := Open(context.Background(), filepath.Join(t.TempDir(), "db"), Options{SiteID: "plant-1", MaxBodyBytes: 10 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { big.Close() })
	_, err = big.Notify(context.Background(), "ops", "s", strings.Repeat("x", 300<<10))
	require.ErrorContains(t, err, "over the limit of 262144 bytes", "MaxBodyBytes is capped at 256 KiB")
}

// A client opened without Options.Calls only notifies: its Call and Write
// say what to import to make them, and track nothing.
func TestNotifyOnlyClientRefusesCallsSayingWhatToImport(t *testing.T) {
	t.Parallel()
	c := newTestClient(t)
	_, err := c.Call(context.Background(), "erp", "getOrder", map[string]any{"id": "A-17"})
	require.ErrorContains(t, err, "targetcalls.New (import github.com/outpost-dev/outpost/site/targetcalls)")
	_, err = c.Write(context.Background(), "historian", "INSERT INTO readings (tag) VALUES (?)", "x")
	require.ErrorContains(t, err, "open it with targetcalls.OpenConfig")
	requireNothingStored(t, c)
}

// Targets given without the means to call them are refused at Open, before
// a store is created, rather than at the first Call.
func TestOpenRefusesTargetsWithoutCalls(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "db")
	db := DefaultDatabase()
	db.DSN = filepath.Join(t.TempDir(), "historian.db")
	_, err := Open(context.Background(), path, Options{SiteID: "plant-1", Databases: map[string]Database{"historian": db}})
	var invalid *InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "Calls", invalid.Field)
	require.Contains(t, invalid.Reason, "set it to targetcalls.New")
	_, statErr := os.Stat(path)
	require.ErrorIs(t, statErr, os.ErrNotExist)
}
