package workers

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/contract"
)

// AwaitListed waits until Temporal lists a central worker of buildID
// (this code's: workflows.WorkerBuildID) among the pollers of central's
// task queue. A site's forwarder starts notifications with their input
// only once it sees such workers there, so the bench and the tests start
// their sites after this.
func AwaitListed(ctx context.Context, tc client.Client, buildID string) error {
	for {
		resp, err := tc.DescribeTaskQueue(ctx, contract.CentralTaskQueue, enums.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil {
			for _, p := range resp.GetPollers() {
				if p.GetWorkerVersionCapabilities().GetBuildId() == buildID {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for Temporal to list a central worker (%s) on %s: %w (last error: %v)",
				buildID, contract.CentralTaskQueue, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
