package centralstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// Every page of the notification list is a seek on an index, never a walk
// from the newest row: SQLite's plan for the first, a later and a
// filtered page names an index and no full-table scan, and needs no sort.
// (outpost bench --only browse times the same pages on 1,000,000 rows.)
func TestNotificationPagesSeekAnIndex(t *testing.T) {
	store := openSQLiteForTest(t)
	after := &Cursor{CreatedAt: time.Now().UTC(), ID: "343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11"}
	for name, f := range map[string]NotificationFilter{
		"first":           {},
		"later":           {After: after},
		"status, later":   {Status: contract.StatusDelivered, After: after},
		"status and site": {Status: contract.StatusParked, Site: "plant-1"},
	} {
		where, args, err := notificationWhere(f)
		require.NoError(t, err)
		plan := testutil.QueryPlan(t, store.db, listNotificationsSQL(where)+" LIMIT 51", args...)
		require.Contains(t, plan, "USING INDEX notifications_", "%s: %s", name, plan)
		require.NotContains(t, plan, "SCAN notifications\n", "%s: %s", name, plan)
		require.NotContains(t, plan, "TEMP B-TREE", "%s: sorted in memory: %s", name, plan)
		if f.After != nil {
			require.Contains(t, plan, "created_at<", "%s: the cursor is a range on the index: %s", name, plan)
		}
	}
}
