package workflows

import (
	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/activities/onsite"
)

// The activities the workflows call, named by method value on nil
// receivers: the workers register the real ones (the central worker the
// first four, each site's daemon siteActs on its own task queue), and an
// activity's name is its method's name. Go-to-definition on a call leads
// from the workflow to the activity.
var (
	auditActs  *activities.AuditActivities
	mirrorActs *activities.MirrorActivities
	settleActs *activities.SettleActivities
	purgeActs  *activities.PurgeActivities
	siteActs   *onsite.SiteActivities
)
