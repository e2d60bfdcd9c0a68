package sitedaemon

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// A long subject or target still gives a summary the server accepts: a
// refused start would be retried forever and the operation never delivered.
func TestStartOptionsKeepSummariesShort(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Überdruck ", 50) // 550 bytes
	sub := contract.NotificationSubmission{NotificationID: "n-1", ListName: "ops", Subject: long, SourceSiteID: "plant-1"}
	n := NotificationStartOptions(sub, false)
	require.LessOrEqual(t, len(n.StaticSummary), contract.MaxSummaryBytes)
	require.True(t, strings.HasPrefix(n.StaticSummary, "Notify ops: Überdruck"), n.StaticSummary)

	c := CachedCallStartOptions(contract.CachedCallSubmission{OperationID: "c-1", Kind: contract.KindExternalCall, Target: "erp." + long, SiteID: "plant-1"})
	require.LessOrEqual(t, len(c.StaticSummary), contract.MaxSummaryBytes)
	require.True(t, strings.HasPrefix(c.StaticSummary, "Call erp.Überdruck"), c.StaticSummary)
}

// site.workflow_summary: list-only keeps the subject out of the summary
// everyone with Web UI access reads.
func TestListOnlySummaryHidesTheSubject(t *testing.T) {
	t.Parallel()
	sub := contract.NotificationSubmission{NotificationID: "n-1", ListName: "ops", Subject: "Pump 3 tripped", SourceSiteID: "plant-1"}
	require.Equal(t, "Notify ops: Pump 3 tripped", NotificationStartOptions(sub, false).StaticSummary)
	require.Equal(t, "Notify ops", NotificationStartOptions(sub, true).StaticSummary)
}

// A site in a region hands its work to the region's queue and marks it
// with OutpostRegion, keeping the other search attributes; without a
// region nothing changes.
func TestInRegionRoutesAndMarksAStart(t *testing.T) {
	t.Parallel()
	sub := contract.NotificationSubmission{NotificationID: "n-1", ListName: "ops", Subject: "Pump 3 tripped", SourceSiteID: "plant-1"}
	plain := NotificationStartOptions(sub, false)
	require.Equal(t, plain, InRegion(plain, contract.Region{}))

	eu := InRegion(plain, contract.Region{Name: "eu", OwnQueue: true})
	require.Equal(t, "outpost-central-eu", eu.TaskQueue)
	region, ok := eu.TypedSearchAttributes.GetKeyword(temporalcontract.AttrRegion)
	require.True(t, ok)
	require.Equal(t, "eu", region)
	require.Equal(t, plain.TypedSearchAttributes.Size()+1, eu.TypedSearchAttributes.Size())
	site, _ := eu.TypedSearchAttributes.GetKeyword(temporalcontract.AttrSite)
	require.Equal(t, "plant-1", site)
	_, ok = plain.TypedSearchAttributes.GetKeyword(temporalcontract.AttrRegion)
	require.False(t, ok, "the options given are not changed")

	own := InRegion(plain, contract.Region{Name: "eu"})
	require.Equal(t, contract.CentralTaskQueue, own.TaskQueue, "a region of its own namespace keeps the queue")
}
