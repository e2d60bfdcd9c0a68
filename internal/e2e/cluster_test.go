package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/notification"
	"github.com/outpost-dev/outpost/temporalcontract"
	"github.com/outpost-dev/outpost/workers"
	"github.com/outpost-dev/outpost/workflows"
	"github.com/outpost-dev/outpost/workflows/operation"
)

// On a self-hosted cluster of two server processes on PostgreSQL (4 history
// shards, 4 task-queue partitions, mutual TLS), with the second node killed
// mid-burst: central registered its search attributes on SQL visibility,
// and every notification and cached call is delivered exactly once, counted
// at the SMTP server and at the target; the site started each as the
// workflow type that carries its input (central runs one generation, 4).
// The site's and central's clients are on the first node's frontend.
func TestClusterDeliversOnceThroughANodeKill(t *testing.T) {
	s := newStack(t, nil, onCluster())
	attrs, err := s.client.OperatorService().ListSearchAttributes(t.Context(),
		&operatorservice.ListSearchAttributesRequest{Namespace: s.cfg.Temporal.Namespace})
	require.NoError(t, err)
	for _, key := range temporalcontract.SearchAttributes {
		require.Contains(t, attrs.GetCustomAttributes(), key.GetName(), "registered by central on SQL visibility")
	}

	const notifications, calls = 20, 5
	// Each call's first request fails: the site buffers it and central's
	// workflow retries it through Temporal.
	s.demo.FailNext(calls, http.StatusServiceUnavailable)
	var notes, callIDs []string
	for i := range calls {
		res, code := s.call("erp", "createOrder", map[string]any{"sku": fmt.Sprintf("cluster-%d", i)})
		require.Equal(t, http.StatusAccepted, code, "a 503 is transient: %s", res.Error)
		callIDs = append(callIDs, res.ID)
	}
	for i := range notifications {
		if i == notifications/2 {
			require.NoError(t, s.cluster.Kill(1))
		}
		notes = append(notes, s.notify("ops", fmt.Sprintf("cluster alarm %d", i)))
	}

	s.waitStatus(contract.StatusDelivered, 3*time.Minute, notes...)
	for _, id := range callIDs {
		s.waitOperation(id, contract.StatusDelivered, 3*time.Minute)
	}
	mail := s.received()
	for _, id := range notes {
		require.Equal(t, 1, mail[id], "emails for %s", id)
	}
	require.Equal(t, calls, s.successfulRequests(), "each call reached the target once")
	for i := range calls {
		require.Equal(t, 1, s.successesFor(fmt.Sprintf("cluster-%d", i)), "call cluster-%d", i)
	}

	note := contract.NotificationWorkflowID(notes[0])
	require.NoError(t, s.client.GetWorkflow(t.Context(), note, "").Get(t.Context(), nil))
	requireStartedWithInput(t, s.client, note, contract.WorkflowNotificationStarted, s.history(note))
	// A call whose hand-off failed while the killed node's shards moved was
	// retried by the site alone and has no workflow; the others were
	// started with their input.
	for _, id := range callIDs {
		wid := contract.CachedCallWorkflowID(id)
		if _, err := s.client.DescribeWorkflowExecution(t.Context(), wid, ""); err == nil {
			requireStartedWithInput(t, s.client, wid, contract.WorkflowCachedCallStarted, s.history(wid))
		}
	}
}

// On the cluster an operator finds parked notifications and calls with a
// visibility query on Outpost's search attributes (SQL visibility) and
// retries them all with one batch signal by that query (the server's batch
// job, run by its system worker over mutual TLS): each is delivered once.
func TestClusterParkQueryBatchRetry(t *testing.T) {
	s := newStack(t, nil, onCluster())
	note, call := s.parkOneOfEach("Pump 3 tripped", "batch-retry")
	const parked = `OutpostStatus="Parked"`
	s.waitParkedCount(parked, 2, time.Minute)
	out := s.temporalCLI("workflow", "list", "--query", parked)
	require.Contains(t, out, contract.NotificationWorkflowID(note))
	require.Contains(t, out, contract.CachedCallWorkflowID(call.ID))

	s.demo.Recover()
	s.startSMTP()
	out = s.temporalCLI("workflow", "signal", "--query", parked, "--name", contract.SignalRetry,
		"--input", `{"operator":"ana","reason":"relay and target fixed"}`, "--yes")
	require.Contains(t, out, "Started batch")

	s.waitStatus(contract.StatusDelivered, 2*time.Minute, note)
	s.waitOperation(call.ID, contract.StatusDelivered, 2*time.Minute)
	require.Equal(t, 1, s.received()[note], "one email after the retry")
	require.Equal(t, 1, s.successesFor("batch-retry"), "the call reached the recovered target once")
	s.waitParkedCount(parked, 0, time.Minute)
}

// With 4 task-queue partitions (the production default) a site still reads
// the generation of every central worker: with generation 4 alone it starts
// notifications and calls with their input (NotificationWorkflowV2,
// CachedCallWorkflowV2); with a generation-3 worker beside it, a site that
// asks then starts notifications but signals calls. The README's command
// for reading the generations shows both build ids.
func TestClusterSiteChoosesTypesByGenerationWithFourPartitions(t *testing.T) {
	s := newStack(t, nil, onCluster())
	parts, err := s.client.WorkflowService().ListTaskQueuePartitions(t.Context(), &workflowservice.ListTaskQueuePartitionsRequest{
		Namespace: s.cfg.Temporal.Namespace, TaskQueue: &taskqueue.TaskQueue{Name: contract.CentralTaskQueue},
	})
	require.NoError(t, err)
	require.Len(t, parts.GetWorkflowTaskQueuePartitions(), 4, "production default: 4 partitions")

	note, call := s.deliverOneOfEach(s.firstSite(), "gen-4")
	requireStartedWithInput(t, s.client, note, contract.WorkflowNotificationStarted, s.history(note))
	requireStartedWithInput(t, s.client, call, contract.WorkflowCachedCallStarted, s.history(call))

	s.startGeneration3Worker()
	note, call = s.deliverOneOfEach(s.addSite("plant-2"), "gen-3")
	requireStartedWithInput(t, s.client, note, contract.WorkflowNotificationStarted, s.history(note))
	desc, err := s.client.DescribeWorkflowExecution(t.Context(), call, "")
	require.NoError(t, err)
	require.Equal(t, contract.WorkflowCachedCall, desc.GetWorkflowExecutionInfo().GetType().GetName(),
		"a generation-3 worker cannot run CachedCallWorkflowV2: the call is signalled")

	out := s.temporalCLI("task-queue", "describe", "--task-queue", contract.CentralTaskQueue, "--legacy-mode", "-o", "json")
	for _, id := range []string{operation.WorkerBuildID, contract.CentralBuildIDPrefix + "3"} {
		require.Contains(t, out, id, "the README's command shows every central worker's build id")
	}
}

// deliverOneOfEach sends a notification and a cached call (whose first
// request fails, so central's workflow retries it) through p, waits until
// both are delivered and returns their workflow ids.
func (s *stack) deliverOneOfEach(p *siteProc, sku string) (noteWorkflow, callWorkflow string) {
	s.t.Helper()
	note := p.notify("ops", "alarm "+sku)
	s.demo.FailNext(1, http.StatusServiceUnavailable)
	res, code := p.call("erp", "createOrder", map[string]any{"sku": sku})
	require.Equal(s.t, http.StatusAccepted, code, "a 503 is transient: %s", res.Error)
	testutil.WaitFor(s.t, 2*time.Minute, func() bool {
		st, _ := p.notification(note)
		row, _ := p.operation(res.ID)
		return st.Status == contract.StatusDelivered && row.Status == contract.StatusDelivered
	}, func() string { return "notification " + note + " and call " + res.ID + " delivered" })
	require.Equal(s.t, 1, s.received()[note], "emails for %s", note)
	require.Equal(s.t, 1, s.successesFor(sku), "call %s reached the target once", sku)
	noteWorkflow, callWorkflow = contract.NotificationWorkflowID(note), contract.CachedCallWorkflowID(res.ID)
	require.NoError(s.t, s.client.GetWorkflow(s.t.Context(), noteWorkflow, "").Get(s.t.Context(), nil))
	return noteWorkflow, callWorkflow
}

// startGeneration3Worker runs, beside central, a worker of generation 3 on
// central's task queue: the workflows generation 3 had, under its build id
// (the workflows branch on the build id, so they run as generation 3 did),
// and no activities, which central's worker runs. It returns once the
// task queue lists it.
func (s *stack) startGeneration3Worker() {
	s.t.Helper()
	const buildID = contract.CentralBuildIDPrefix + "3"
	// Its own identity, as another process has: Temporal lists a task
	// queue's pollers by identity, and this test's central worker shares
	// the client's. Central's number of pollers: a site reads the pollers
	// of the root partition, which lists a worker once one of its polls
	// lands there; with two pollers that took up to a minute.
	opts := workers.PollerOptions()
	opts.BuildID, opts.Identity = buildID, "central-generation-3"
	w := worker.New(s.client, contract.CentralTaskQueue, opts)
	notify := notification.Workflow{AttemptTimeout: time.Minute}
	w.RegisterWorkflowWithOptions(notify.Run, workflow.RegisterOptions{Name: contract.WorkflowNotification})
	w.RegisterWorkflowWithOptions(notify.RunStarted, workflow.RegisterOptions{Name: contract.WorkflowNotificationStarted})
	w.RegisterWorkflowWithOptions(workflows.CachedCallWorkflow, workflow.RegisterOptions{Name: contract.WorkflowCachedCall})
	w.RegisterWorkflowWithOptions(workflows.IngestTelemetryWorkflow, workflow.RegisterOptions{Name: contract.WorkflowIngestTelemetry})
	w.RegisterWorkflowWithOptions(workflows.ReconcileSiteWorkflow, workflow.RegisterOptions{Name: contract.WorkflowReconcileSite})
	w.RegisterWorkflowWithOptions(workflows.PurgeWorkflow, workflow.RegisterOptions{Name: contract.WorkflowPurge})
	w.RegisterWorkflowWithOptions(notification.LookupWorkflow, workflow.RegisterOptions{Name: contract.WorkflowLookupNotification})
	require.NoError(s.t, w.Start())
	s.t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(s.t, workers.AwaitListed(ctx, s.client, buildID))
}

// successesFor counts the target's answered-200 requests for sku.
func (s *stack) successesFor(sku string) int {
	s.t.Helper()
	n := 0
	for _, r := range s.demo.Requests() {
		if r.Status == http.StatusOK && strings.Contains(string(r.Body), fmt.Sprintf("%q", sku)) {
			n++
		}
	}
	return n
}

// successfulRequests counts the target's answered-200 requests.
func (s *stack) successfulRequests() int {
	n := 0
	for _, r := range s.demo.Requests() {
		if r.Status == http.StatusOK {
			n++
		}
	}
	return n
}

// temporalCLI runs the pinned temporal CLI against the stack's frontend,
// with its mutual-TLS files when it has them, and returns its output.
func (s *stack) temporalCLI(args ...string) string {
	s.t.Helper()
	bin, err := devserver.TemporalBinary(s.t.Context())
	require.NoError(s.t, err)
	t := s.cfg.Temporal
	args = append(args, "--address", t.Address, "--namespace", t.Namespace)
	if t.TLSCertFile != "" {
		args = append(args, "--tls-cert-path", t.TLSCertFile, "--tls-key-path", t.TLSKeyFile,
			"--tls-ca-path", t.TLSCAFile, "--tls-server-name", t.TLSServerName)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(s.t, err, "temporal %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}
