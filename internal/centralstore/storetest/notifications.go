package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// listNotifications pages through every notification of a site, newest
// first, each once (two share a created time: the id breaks the tie), and
// filters by status, list, subject word and time.
func listNotifications(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	site := "list-" + uuid.NewString()[:8]
	base := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	var rows []centralstore.Notification
	for i := range 7 {
		row := newRow()
		row.SourceSiteID, row.Subject = site, fmt.Sprintf("reading %d", i)
		row.CreatedAt = base.Add(time.Duration(min(i, 5)) * time.Minute) // rows 5 and 6 share a time
		if i%3 == 0 {
			row.ListName = "maint"
		}
		_, _, err := store.InsertNotification(ctx, row)
		require.NoError(t, err)
		rows = append(rows, row)
	}
	require.NoError(t, store.MarkNotificationDelivered(ctx, rows[1].NotificationID, base, []string{"ops@example.com"}))
	slices.SortFunc(rows, func(a, b centralstore.Notification) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.NotificationID, a.NotificationID))
	})

	var got []string
	filter := centralstore.NotificationFilter{Site: site, Limit: 3}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3, "7 rows are 3 pages of 3")
		page, err := store.ListNotifications(ctx, filter)
		require.NoError(t, err)
		for _, n := range page.Notifications {
			got = append(got, n.NotificationID)
		}
		if page.Next == nil {
			require.Empty(t, page.NextToken)
			break
		}
		after, err := centralstore.ParseCursor(page.NextToken)
		require.NoError(t, err)
		filter.After = &after
	}
	want := make([]string, len(rows))
	for i, r := range rows {
		want[i] = r.NotificationID
	}
	require.Equal(t, want, got, "every row once, newest first")

	count := func(f centralstore.NotificationFilter) int {
		f.Site = site
		page, err := store.ListNotifications(ctx, f)
		require.NoError(t, err)
		return len(page.Notifications)
	}
	require.Equal(t, 1, count(centralstore.NotificationFilter{Status: contract.StatusDelivered}))
	require.Equal(t, 6, count(centralstore.NotificationFilter{Status: contract.StatusPending}))
	require.Equal(t, 3, count(centralstore.NotificationFilter{List: "maint"}))
	require.Equal(t, 1, count(centralstore.NotificationFilter{Query: "reading 4"}))
	require.Equal(t, 1, count(centralstore.NotificationFilter{CreatedFrom: base.Add(4 * time.Minute), CreatedTo: base.Add(5 * time.Minute)}), "to is exclusive")
	require.Equal(t, 2, count(centralstore.NotificationFilter{CreatedFrom: base.Add(5 * time.Minute), CreatedTo: base.Add(6 * time.Minute)}), "from is inclusive")
	require.Equal(t, 6, count(centralstore.NotificationFilter{StuckOnly: true, Now: time.Now(), StuckAge: 10 * time.Minute}))
	require.Zero(t, count(centralstore.NotificationFilter{StuckOnly: true, Now: base, StuckAge: 10 * time.Minute}))

	_, err := store.ListNotifications(ctx, centralstore.NotificationFilter{Status: "Lost"})
	require.ErrorIs(t, err, centralstore.ErrInvalidFilter)
	_, err = centralstore.ParseCursor("yesterday_" + rows[0].NotificationID)
	require.ErrorIs(t, err, centralstore.ErrInvalidFilter)
}
