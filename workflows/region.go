package workflows

import (
	"fmt"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// RegionGuard is the interceptor of a central worker that serves region
// (contract.Region.Name; "" for none). Before any workflow code runs, it
// compares the workflow's OutpostRegion with region and, when they differ,
// logs why and panics: the workflow task fails and Temporal retries it, so
// the workflow stays open, nothing of it runs here (no delivery, no retry,
// no store write), and a worker of its own region can still take it. A
// workflow without OutpostRegion (started before regions, or by a site
// without one) runs on any worker of its queue, as before regions.
//
// The guard adds no command to any history, so it needs no version check:
// a workflow that passed it once passes it again on replay, on the same
// worker's region.
func RegionGuard(region string) interceptor.WorkerInterceptor {
	return &regionGuard{region: region}
}

type regionGuard struct {
	interceptor.WorkerInterceptorBase
	region string
}

func (g *regionGuard) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &regionGuardInbound{region: g.region}
	in.Next = next
	return in
}

type regionGuardInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	region string
}

func (in *regionGuardInbound) ExecuteWorkflow(ctx workflow.Context, input *interceptor.ExecuteWorkflowInput) (any, error) {
	if refusal := refuseOtherRegion(ctx, in.region); refusal != "" {
		workflow.GetLogger(ctx).Error(refusal)
		panic(refusal)
	}
	return in.Next.ExecuteWorkflow(ctx, input)
}

// refuseOtherRegion is why this worker, of region, must not run the
// workflow: what it is, whose it is, and the fix; "" when it may.
func refuseOtherRegion(ctx workflow.Context, region string) string {
	owner, marked := workflow.GetTypedSearchAttributes(ctx).GetKeyword(temporalcontract.AttrRegion)
	if !marked || owner == region {
		return ""
	}
	info := workflow.GetInfo(ctx)
	return fmt.Sprintf("refused workflow %s: it belongs to region %q (%s) but this central worker serves %s (central.region) "+
		"on task queue %s of namespace %s; it is not run here and stays open. Fix the configuration of the site or tool that "+
		"started it (site.region, site.region_queue, temporal.namespace), and run a central worker of region %q on this "+
		"task queue to finish it",
		info.WorkflowExecution.ID, owner, temporalcontract.AttrRegion.GetName(), contract.RegionWords(region), info.TaskQueueName, info.Namespace, owner)
}
