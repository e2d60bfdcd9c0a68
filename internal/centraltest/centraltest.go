// Package centraltest gives tests a real central store in a SQLite file
// and reads an operation's audit trail from it.
package centraltest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/centralstore"
)

// Open is a real central store in a SQLite file under t.TempDir(), closed
// when t ends, and its path.
func Open(t *testing.T) (*centralstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "central.db")
	store, err := centralstore.OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store, path
}

// AuditTrail is the operation's stored events as "Event Status operator",
// checked to be in time order.
func AuditTrail(t *testing.T, store *centralstore.Store, id string) []string {
	t.Helper()
	events, err := store.ListAuditEvents(context.Background(), id)
	require.NoError(t, err)
	out := []string{}
	for i, e := range events {
		if i > 0 {
			require.False(t, e.At.Before(events[i-1].At), "events in time order")
		}
		out = append(out, fmt.Sprintf("%s %s %s", e.Event, e.Status, e.Operator))
	}
	return out
}
