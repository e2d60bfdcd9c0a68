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
// (this code's: operation.WorkerBuildID) among the pollers of central's
// task queue. A site's forwarder starts notifications with their input
// only once it sees such workers there, so the bench and the tests start
// their sites after this.
func AwaitListed(ctx context.Context, tc client.Client, buildID string) error {
	return AwaitListedOn(ctx, tc, contract.CentralTaskQueue, buildID)
}

// AwaitListedOn is AwaitListed on queue: a region's central task queue.
func AwaitListedOn(ctx context.Context, tc client.Client, queue, buildID string) error {
	for {
		resp, err := tc.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_WORKFLOW)
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
				buildID, queue, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
