package sitedaemon

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// A notification buffered while the clock ran an hour ahead, then the clock
// set back: its created time is in the future, yet the oldest-age metric
// grows while it waits, and the clock lead shows the hour.
func TestOldestAgeGrowsAfterTheClockIsSetBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ahead := func() time.Time { return time.Now().Add(time.Hour) }
	store, err := sitestore.Open(ctx, filepath.Join(t.TempDir(), "site.db"), sitestore.Options{Now: ahead})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	_, err = store.Enqueue(ctx, sitestore.NewMessage{ID: "n-1", Category: contract.KindNotification, Target: "ops", Payload: []byte("{}")})
	require.NoError(t, err)

	reg := newMetricsRegistry(store, NewForwarder(store, targets.New(nil, nil), nil, ForwarderOptions{}, zap.NewNop()), time.Now)
	gather := func() map[string]*dto.MetricFamily {
		families, err := reg.Gather()
		require.NoError(t, err)
		byName := map[string]*dto.MetricFamily{}
		for _, f := range families {
			byName[f.GetName()] = f
		}
		return byName
	}
	oldest := map[string]string{"category": contract.KindNotification}
	first := gather()
	require.Greater(t, testutil.MetricValue(first, "outpost_site_clock_lead_seconds", nil), 3500.0)
	time.Sleep(1100 * time.Millisecond)
	require.GreaterOrEqual(t, testutil.MetricValue(gather(), "outpost_site_buffer_oldest_age_seconds", oldest), 1.0,
		"the row has waited a second by the monotonic clock")
}
