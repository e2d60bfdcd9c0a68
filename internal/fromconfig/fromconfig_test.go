package fromconfig

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// Every field of the site section reaches the daemon's options.
func TestSiteDaemonCarriesEveryField(t *testing.T) {
	t.Parallel()
	var s config.Site
	testutil.FillDistinct(&s)
	s.WorkflowSummary = config.SummaryListOnly
	opts := SiteDaemon(s)
	testutil.RequireCarried(t, s, opts, config.SummaryListOnly) // list-only becomes HideSubject
	require.True(t, opts.HideSubject)
	require.False(t, SiteDaemon(config.Default().Site).HideSubject)
}
