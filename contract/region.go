package contract

import "fmt"

// Region is the ownership scope a site's work belongs to: only central
// workers of the same region run, retry or purge it. The zero Region is
// no region: today's single queue, schedule and ingest ids.
type Region struct {
	// Name is the region's name (CheckRegionName); empty for none.
	Name string
	// OwnQueue routes the region's work to its own task queue
	// (outpost-central-<Name>) in a namespace regions share; otherwise the
	// region is a namespace of its own and keeps CentralTaskQueue there.
	OwnQueue bool
}

// maxRegionName keeps a region a valid DNS label, and so a valid
// namespace name and task-queue suffix everywhere Temporal runs.
const maxRegionName = 63

// CheckRegionName refuses a name that is not a valid region: 1-63
// lower-case letters, digits and '-', beginning and ending with a letter or
// digit, so that it is a valid Temporal namespace name and task-queue
// suffix alike.
func CheckRegionName(name string) error {
	valid := name != "" && len(name) <= maxRegionName && name[0] != '-' && name[len(name)-1] != '-'
	for i := 0; valid && i < len(name); i++ {
		ch := name[i]
		valid = 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-'
	}
	if !valid {
		return fmt.Errorf("region %q: want 1-%d lower-case letters, digits and '-', beginning and ending with a letter or digit (it names a Temporal namespace or the task queue outpost-central-<region>)", name, maxRegionName)
	}
	return nil
}

// TaskQueue is the queue the region's central workers poll and its sites
// hand their work to.
func (r Region) TaskQueue() string {
	if r.Name != "" && r.OwnQueue {
		return CentralTaskQueue + "-" + r.Name
	}
	return CentralTaskQueue
}

// PurgeScheduleID names the region's daily purge schedule.
func (r Region) PurgeScheduleID() string {
	if r.Name == "" {
		return PurgeScheduleID
	}
	return PurgeScheduleID + "-" + r.Name
}

// TelemetryIngestWorkflowID is the region's ingest workflow siteID sends
// its telemetry batches to: two regions in one namespace never share one.
func (r Region) TelemetryIngestWorkflowID(siteID string) string {
	if r.Name == "" {
		return TelemetryIngestWorkflowID(siteID)
	}
	return telemetryIDPrefix + "ingest-" + r.Name + "-" + ingestShard(siteID)
}

// RegionWords names a region in a message: `region "eu"`, or "no region"
// for the empty name.
func RegionWords(name string) string {
	if name == "" {
		return "no region"
	}
	return fmt.Sprintf("region %q", name)
}
