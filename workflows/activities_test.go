package workflows_test

import (
	"reflect"
	"runtime"
	"strings"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/activities/onsite"
)

// The activities the tests mock, by method value as the workflows call them.
var (
	auditActs  *activities.AuditActivities
	mirrorActs *activities.MirrorActivities
	settleActs *activities.SettleActivities
	purgeActs  *activities.PurgeActivities
	siteActs   *onsite.SiteActivities
)

// nameOf is the activity name of a method value, the way the SDK names it:
// the method's name. testify's call assertions take names.
func nameOf(activity any) string {
	full := runtime.FuncForPC(reflect.ValueOf(activity).Pointer()).Name() // "…activities.(*T).Method-fm"
	return strings.TrimSuffix(full[strings.LastIndex(full, ".")+1:], "-fm")
}
