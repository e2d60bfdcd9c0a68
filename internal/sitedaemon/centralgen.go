package sitedaemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
)

// How long an answer of startCheck stands. One short of the latest
// generation this site knows is asked again soon: central's upgrade is
// what raises it, and the sooner a site sees it the sooner it saves the
// signals. The latest stands longer: it falls only if an older worker polls
// again (a roll back), whose workflow tasks of the new types fail until a
// current worker takes them: nothing is lost meanwhile.
const (
	startCheckNoFor  = 10 * time.Second
	startCheckYesFor = time.Minute
)

// startCheck tells the forwarder how central's workers take a hand-off:
// the lowest generation named in the build ids of the workers polling
// the central task queue of the site's region (contract.Region.TaskQueue). From contract.GenerationStartsNotifications a
// notification's workflow is started with its submission as the input
// (contract.WorkflowNotificationStarted), and from
// contract.GenerationStartsCalls a cached call's
// (contract.WorkflowCachedCallStarted), instead of signalling them; from
// contract.GenerationTelemetryIngest telemetry batches go by update to
// central's long-running ingest workflows instead of each starting one,
// and from contract.GenerationCompressedTelemetry compressed. A site
// upgraded before central so keeps signalling, which central's older
// workers understand; any doubt (no poller listed, an error) answers
// generation 0: signal.
type startCheck struct {
	tc client.Client
	// queue is the central task queue of the site's region.
	queue string
	log   *zap.Logger
	now   func() time.Time

	mu         sync.Mutex
	asked      bool
	generation int
	validTill  time.Time
	deniedSaid bool
}

func newStartCheck(tc client.Client, queue string, log *zap.Logger) *startCheck {
	return &startCheck{tc: tc, queue: queue, log: log, now: time.Now}
}

// startsNotifications reports whether notifications are started with their
// input.
func (c *startCheck) startsNotifications(ctx context.Context) bool {
	return c.centralGeneration(ctx) >= contract.GenerationStartsNotifications
}

// startsCalls reports whether cached calls are started with their input.
func (c *startCheck) startsCalls(ctx context.Context) bool {
	return c.centralGeneration(ctx) >= contract.GenerationStartsCalls
}

// sendsToTelemetryIngest reports whether telemetry batches go by update to
// central's long-running ingest workflows.
func (c *startCheck) sendsToTelemetryIngest(ctx context.Context) bool {
	return c.centralGeneration(ctx) >= contract.GenerationTelemetryIngest
}

// compressesTelemetry reports whether telemetry batches go compressed.
func (c *startCheck) compressesTelemetry(ctx context.Context) bool {
	return c.centralGeneration(ctx) >= contract.GenerationCompressedTelemetry
}

// centralGeneration answers, asking Temporal when the last answer is
// stale. Hand-offs running meanwhile wait for the one question.
func (c *startCheck) centralGeneration(ctx context.Context) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now().Before(c.validTill) {
		return c.generation
	}
	generation := c.ask(ctx)
	if !c.asked || generation != c.generation {
		c.log.Info(fmt.Sprintf("notifications are now handed off as %s, cached calls as %s, telemetry to %s",
			notificationWorkflowType(generation), callWorkflowType(generation), telemetryWorkflowType(generation)),
			zap.Int("centralGeneration", generation), zap.String("why", "the generations of the workers polling "+c.queue))
	}
	c.asked, c.generation = true, generation
	c.validTill = c.now().Add(startCheckNoFor)
	if generation >= contract.GenerationCompressedTelemetry {
		c.validTill = c.now().Add(startCheckYesFor)
	}
	return generation
}

// ask lists the workers polling central's task queue for workflow tasks.
func (c *startCheck) ask(ctx context.Context) int {
	resp, err := c.tc.DescribeTaskQueue(ctx, c.queue, enums.TASK_QUEUE_TYPE_WORKFLOW)
	var denied *serviceerror.PermissionDenied
	switch {
	case errors.As(err, &denied) && !c.deniedSaid:
		// Said once: the site works, at one billed action more each.
		c.deniedSaid = true
		c.log.Warn("this site's Temporal credentials may not list the workers of "+c.queue+
			" (DescribeTaskQueue): notifications and cached calls are handed off by signal, one Temporal action more each", zap.Error(err))
		return 0
	case err != nil:
		c.log.Debug("cannot list central's workers; handing off by signal", zap.Error(err))
		return 0
	}
	return lowestGeneration(resp.GetPollers())
}

// lowestGeneration is the lowest generation of this code that pollers run,
// 0 when there are none.
func lowestGeneration(pollers []*taskqueuepb.PollerInfo) int {
	if len(pollers) == 0 {
		return 0
	}
	lowest := contract.CentralGeneration(pollers[0].GetWorkerVersionCapabilities().GetBuildId())
	for _, p := range pollers[1:] {
		lowest = min(lowest, contract.CentralGeneration(p.GetWorkerVersionCapabilities().GetBuildId()))
	}
	return lowest
}

// notificationWorkflowType names the workflow a notification's hand-off
// starts while central's workers are of generation.
func notificationWorkflowType(generation int) string {
	if generation >= contract.GenerationStartsNotifications {
		return contract.WorkflowNotificationStarted
	}
	return contract.WorkflowNotification
}

// callWorkflowType names the workflow a cached call's hand-off starts
// while central's workers are of generation.
func callWorkflowType(generation int) string {
	if generation >= contract.GenerationStartsCalls {
		return contract.WorkflowCachedCallStarted
	}
	return contract.WorkflowCachedCall
}

// telemetryWorkflowType names the workflow a telemetry batch goes to while
// central's workers are of generation.
func telemetryWorkflowType(generation int) string {
	switch {
	case generation >= contract.GenerationCompressedTelemetry:
		return contract.WorkflowTelemetryIngest + " (compressed)"
	case generation >= contract.GenerationTelemetryIngest:
		return contract.WorkflowTelemetryIngest
	}
	return contract.WorkflowIngestTelemetry
}
