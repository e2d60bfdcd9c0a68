// Package schedule keeps Outpost's Temporal Schedules (central's daily
// purge, each site's reconciliation) as their owners describe them.
package schedule

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Ensure creates the schedule opts describe, or brings an existing
// one's spec, action and overlap policy in line with opts. Operators see,
// pause and trigger schedules on the Web UI's Schedules page; an update
// keeps a pause.
func Ensure(ctx context.Context, tc client.Client, opts client.ScheduleOptions) error {
	_, err := tc.ScheduleClient().Create(ctx, opts)
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		if err != nil {
			return fmt.Errorf("create schedule %s: %w", opts.ID, err)
		}
		return nil
	}
	err = tc.ScheduleClient().GetHandle(ctx, opts.ID).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec, s.Action = &opts.Spec, opts.Action
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap = opts.Overlap
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("update schedule %s: %w", opts.ID, err)
	}
	return nil
}
