package site

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/workflows"
)

// A long subject or target still gives a summary the server accepts: a
// refused start would be retried forever and the operation never delivered.
func TestStartOptionsKeepSummariesShort(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Überdruck ", 50) // 550 bytes
	n := NotificationStartOptions(workflows.NotificationSubmission{NotificationID: "n-1", ListName: "ops", Subject: long, SourceSiteID: "plant-1"})
	require.LessOrEqual(t, len(n.StaticSummary), workflows.MaxSummaryBytes)
	require.True(t, strings.HasPrefix(n.StaticSummary, "Notify ops: Überdruck"), n.StaticSummary)

	c := CachedCallStartOptions(workflows.CachedCallSubmission{OperationID: "c-1", Kind: workflows.KindExternalCall, Target: "erp." + long, SiteID: "plant-1"})
	require.LessOrEqual(t, len(c.StaticSummary), workflows.MaxSummaryBytes)
	require.True(t, strings.HasPrefix(c.StaticSummary, "Call erp.Überdruck"), c.StaticSummary)
}
