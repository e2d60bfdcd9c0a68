package sitedaemon

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
)

// How long an answer of startCheck stands. A "no" is asked again soon:
// central's upgrade is what turns it, and the sooner a site sees it the
// sooner it saves the signal. A "yes" turns only if an older worker polls
// again (a roll back), whose workflow tasks of the new type fail until a
// current worker takes them: nothing is lost meanwhile.
const (
	startCheckNoFor  = 10 * time.Second
	startCheckYesFor = time.Minute
)

// startCheck tells the forwarder whether to start a notification's
// workflow with its submission as the input (contract.WorkflowNotificationStarted)
// instead of signalling it: only when every worker polling
// contract.CentralTaskQueue names generation
// contract.GenerationStartsNotifications or later in its build id. A site
// upgraded before central so keeps signalling, which central's older
// workers understand; any doubt (no poller listed, an error) answers no.
type startCheck struct {
	tc  client.Client
	log *zap.Logger
	now func() time.Time

	mu         sync.Mutex
	asked      bool
	answer     bool
	validTill  time.Time
	deniedSaid bool
}

func newStartCheck(tc client.Client, log *zap.Logger) *startCheck {
	return &startCheck{tc: tc, log: log, now: time.Now}
}

// startsNotifications answers, asking Temporal when the last answer is
// stale. Hand-offs running meanwhile wait for the one question.
func (c *startCheck) startsNotifications(ctx context.Context) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now().Before(c.validTill) {
		return c.answer
	}
	answer := c.ask(ctx)
	if !c.asked || answer != c.answer {
		c.log.Info("notifications are now handed off as "+notificationWorkflowType(answer),
			zap.Bool("startWithInput", answer), zap.String("why", "the generations of the workers polling "+contract.CentralTaskQueue))
	}
	c.asked, c.answer = true, answer
	c.validTill = c.now().Add(startCheckNoFor)
	if answer {
		c.validTill = c.now().Add(startCheckYesFor)
	}
	return answer
}

// ask lists the workers polling central's task queue for workflow tasks.
func (c *startCheck) ask(ctx context.Context) bool {
	resp, err := c.tc.DescribeTaskQueue(ctx, contract.CentralTaskQueue, enums.TASK_QUEUE_TYPE_WORKFLOW)
	var denied *serviceerror.PermissionDenied
	switch {
	case errors.As(err, &denied) && !c.deniedSaid:
		// Said once: the site works, at one billed action more each.
		c.deniedSaid = true
		c.log.Warn("this site's Temporal credentials may not list the workers of "+contract.CentralTaskQueue+
			" (DescribeTaskQueue): notifications are handed off by signal, one Temporal action more each", zap.Error(err))
		return false
	case err != nil:
		c.log.Debug("cannot list central's workers; handing notifications off by signal", zap.Error(err))
		return false
	}
	return allStartNotifications(resp.GetPollers())
}

// allStartNotifications reports whether pollers is not empty and every one
// runs a generation that knows contract.WorkflowNotificationStarted.
func allStartNotifications(pollers []*taskqueuepb.PollerInfo) bool {
	for _, p := range pollers {
		if contract.CentralGeneration(p.GetWorkerVersionCapabilities().GetBuildId()) < contract.GenerationStartsNotifications {
			return false
		}
	}
	return len(pollers) > 0
}

// notificationWorkflowType names the workflow a hand-off starts.
func notificationWorkflowType(startWithInput bool) string {
	if startWithInput {
		return contract.WorkflowNotificationStarted
	}
	return contract.WorkflowNotification
}
