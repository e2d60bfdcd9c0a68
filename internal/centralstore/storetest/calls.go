package storetest

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// listCalls pages through every call and write of a site, newest first,
// each once (two share a created time: the id breaks the tie), terminal
// ones too, and filters by status, kind, target and time.
func listCalls(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	site := newSiteID()
	base := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	statuses := []contract.Status{contract.StatusPending, contract.StatusRetrying, contract.StatusParked,
		contract.StatusDelivered, contract.StatusFailed, contract.StatusDiscarded, contract.StatusDelivered}
	var rows []contract.TrackedOperation
	for i, status := range statuses {
		row := newSiteCall(site, int64(i+1))
		row.Status = status
		row.CreatedAt = base.Add(time.Duration(min(i, 5)) * time.Minute) // rows 5 and 6 share a time
		if i%3 == 0 {
			row.Kind, row.Target = contract.KindDatabaseWrite, "historian"
		}
		rows = append(rows, row)
	}
	other := newSiteCall(newSiteID(), 1) // another site's: never listed below
	_, err := store.UpsertSiteCalls(ctx, append(slices.Clone(rows), other))
	require.NoError(t, err)
	slices.SortFunc(rows, func(a, b contract.TrackedOperation) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.OperationID, a.OperationID))
	})

	var got []contract.TrackedOperation
	filter := centralstore.CallFilter{Site: site, Limit: 3}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3, "7 rows are 3 pages of 3")
		page, err := store.ListCalls(ctx, filter)
		require.NoError(t, err)
		got = append(got, page.Calls...)
		if page.Next == nil {
			require.Empty(t, page.NextToken)
			break
		}
		after, err := centralstore.ParseCursor(page.NextToken)
		require.NoError(t, err)
		filter.After = &after
	}
	require.Len(t, got, len(rows), "every row once")
	for i := range rows {
		requireSameCall(t, rows[i], got[i])
	}

	count := func(f centralstore.CallFilter) int {
		f.Site = site
		page, err := store.ListCalls(ctx, f)
		require.NoError(t, err)
		return len(page.Calls)
	}
	require.Equal(t, 2, count(centralstore.CallFilter{Status: contract.StatusDelivered}))
	require.Equal(t, 1, count(centralstore.CallFilter{Status: contract.StatusFailed}))
	require.Equal(t, 1, count(centralstore.CallFilter{Status: contract.StatusDiscarded}))
	require.Equal(t, 3, count(centralstore.CallFilter{Kind: contract.KindDatabaseWrite}))
	require.Equal(t, 3, count(centralstore.CallFilter{Target: "historian"}))
	require.Equal(t, 1, count(centralstore.CallFilter{Target: "historian", Status: contract.StatusPending}))
	require.Zero(t, count(centralstore.CallFilter{Target: "historian", Kind: contract.KindExternalCall}))
	require.Equal(t, 1, count(centralstore.CallFilter{CreatedFrom: base.Add(4 * time.Minute), CreatedTo: base.Add(5 * time.Minute)}), "to is exclusive")
	require.Equal(t, 2, count(centralstore.CallFilter{CreatedFrom: base.Add(5 * time.Minute), CreatedTo: base.Add(6 * time.Minute)}), "from is inclusive")

	// Without a site filter the other site's call is listed too.
	page, err := store.ListCalls(ctx, centralstore.CallFilter{Target: other.Target, CreatedFrom: other.CreatedAt, CreatedTo: other.CreatedAt.Add(time.Millisecond)})
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(page.Calls, func(c contract.TrackedOperation) bool { return c.OperationID == other.OperationID }))

	for _, bad := range []centralstore.CallFilter{{Status: "Lost"}, {Kind: contract.KindNotification}, {Kind: "Fax"}} {
		_, err := store.ListCalls(ctx, bad)
		require.ErrorIs(t, err, centralstore.ErrInvalidFilter, "%+v", bad)
	}
}
