// Package workers assembles Outpost's Temporal workers.
package workers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/activities/heartbeat"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/operator"
	"github.com/outpost-dev/outpost/internal/outbox"
	"github.com/outpost-dev/outpost/internal/schedule"
	"github.com/outpost-dev/outpost/notification"
	"github.com/outpost-dev/outpost/temporalcontract"
	"github.com/outpost-dev/outpost/workflows"
	"github.com/outpost-dev/outpost/workflows/operation"
)

// Central is the central worker on its region's task queue
// (outpost-central without a region).
type Central struct {
	worker worker.Worker
	store  *centralstore.Store
	http   *centralHTTP
	// purge ensures the region's purge schedule once the worker runs.
	purge func(context.Context) error
	log   *zap.Logger
}

// CentralOptions configure the central worker. The CLI translates the config
// file's central and temporal sections into them (internal/fromconfig).
type CentralOptions struct {
	Store StoreOptions
	// Mailer is how email is sent; MailRetryInterval and MailMaxRetries
	// are the retry policy of a notification's delivery.
	Mailer            notification.MailerConfig
	MailRetryInterval time.Duration
	MailMaxRetries    int
	// Listen is where the outbox page, /metrics, /healthz and /readyz are served.
	Listen string
	// TemporalUIURL is the Temporal Web UI the outbox page links each item to,
	// in Namespace.
	TemporalUIURL string
	Namespace     string
	// Codec decrypts payloads for the outbox page and its codec server; nil
	// when payloads are not encrypted.
	Codec converter.PayloadCodec
	// StuckAge is how old a non-terminal operation must be to count as stuck.
	StuckAge  time.Duration
	Retention activities.Retention
	// Lists maps a notification list name to its recipients; seeded into
	// the store at start.
	Lists map[string][]string
	// PageAuth says who may use the outbox page; an open page is refused
	// beyond loopback.
	PageAuth outbox.Auth
	// CodecOrigins are the browser origins allowed to call the codec server.
	CodecOrigins []string
	// PageHosts are the names, beside localhost, IP addresses and the host
	// of Listen, the outbox page answers to; it refuses others with 421.
	PageHosts []string
	// Region is the one region this worker serves and how its work is
	// routed; the zero Region is none (outpost-central, as without regions).
	Region contract.Region
}

// StoreOptions say which central store to open: a SQLite file at Path, or
// SQL Server or PostgreSQL at DSN (with its password) when Driver is
// DriverSQLServer or DriverPostgres.
type StoreOptions struct {
	Driver string
	Path   string
	DSN    string
}

// StoreOptions.Driver for a database server; any other opens SQLite.
const (
	DriverSQLServer = "sqlserver"
	DriverPostgres  = "postgres"
)

// TaskPollers is how many polls a central worker keeps open on its task
// queue for workflow tasks, and as many for activity tasks. With the SDK's
// default of two, a burst of notifications finds no poll waiting: Temporal's
// matching service then writes each task to the task queue's backlog in its
// database and reads it back, and the tasks wait there behind one another
// (8.5 s between a notification's first workflow task being scheduled and
// started, in a burst of 250 on the dev server). With a poll waiting, a
// task goes straight to it. Sixteen delivered notifications twice as fast
// as two on the dev server, and 32 no faster (measured with outpost bench).
const TaskPollers = 16

// PollerOptions are a central worker's poller settings (TaskPollers): the
// bench's bare baseline worker runs with the same.
//
// Workflow task polls scale between 2 and TaskPollers (the SDK's
// autoscaling behaviour), because it always keeps one poll on the shared
// task queue. The SDK's fixed pollers poll only the worker's own sticky
// queue while that has a backlog: when retries come due faster than the
// worker can attempt them (each retry's workflow tasks go to the sticky
// queue of the worker that ran the last one), new notifications' first
// tasks on the shared queue waited for minutes, or for ever
// (TestNewNotificationsAreNotStarvedByRetries).
func PollerOptions() worker.Options {
	return worker.Options{
		WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: TaskPollers, MinimumNumberOfPollers: 2, MaximumNumberOfPollers: TaskPollers,
		}),
		MaxConcurrentActivityTaskPollers: TaskPollers,
	}
}

// NewCentral opens the central store, registers the workflows and
// activities with a worker on tc, and binds central.listen for the outbox
// page, metrics (into registry, which holds the SDK's metrics too: see
// NewCentralMetrics) and health. log receives what the outbox page logs
// (failed and throttled sign-ins) and the purge schedule's troubles (Run
// ensures it).
func NewCentral(ctx context.Context, cfg CentralOptions, tc client.Client, registry *prometheus.Registry, log *zap.Logger) (*Central, error) {
	store, err := OpenCentralStore(ctx, cfg.Store)
	if err != nil {
		return nil, err
	}
	events := NewDeliveryEvents()
	store.ObserveAudit(countDeliveryEvents(events))
	policy := notificationPolicy(cfg)
	// The build id names the workflow code's generation in every task's
	// history, on which NotificationWorkflow branches, and in the task
	// queue's poller list, where sites look for it (operation.WorkerBuildID).
	opts := PollerOptions()
	opts.BuildID = operation.WorkerBuildID
	// Delivery attempts heartbeat every heartbeat.Every: send each one, not
	// one per 0.8 × heartbeat.Timeout (the SDK's batching).
	opts.MaxHeartbeatThrottleInterval = heartbeat.Every
	// Named here, not left to the SDK, so each email carries it too.
	queue := cfg.Region.TaskQueue()
	opts.Identity = workerIdentity(queue)
	// A workflow of another region that reaches this queue by mistake (a
	// site configured with the wrong namespace) is refused, never run.
	opts.Interceptors = append(opts.Interceptors, workflows.RegionGuard(cfg.Region.Name))
	w := worker.New(tc, queue, opts)
	notify := notification.Workflow{AttemptTimeout: policy.AttemptTimeout}
	w.RegisterWorkflowWithOptions(notify.Run, workflow.RegisterOptions{Name: contract.WorkflowNotification})
	w.RegisterWorkflowWithOptions(notify.RunStarted, workflow.RegisterOptions{Name: contract.WorkflowNotificationStarted})
	w.RegisterWorkflowWithOptions(workflows.CachedCallWorkflow, workflow.RegisterOptions{Name: contract.WorkflowCachedCall})
	w.RegisterWorkflowWithOptions(workflows.CachedCallWorkflowStarted, workflow.RegisterOptions{Name: contract.WorkflowCachedCallStarted})
	w.RegisterWorkflowWithOptions(workflows.IngestTelemetryWorkflow, workflow.RegisterOptions{Name: contract.WorkflowIngestTelemetry})
	w.RegisterWorkflowWithOptions(workflows.TelemetryIngestWorkflow, workflow.RegisterOptions{Name: contract.WorkflowTelemetryIngest})
	w.RegisterWorkflowWithOptions(workflows.ReconcileSiteWorkflow, workflow.RegisterOptions{Name: contract.WorkflowReconcileSite})
	w.RegisterWorkflowWithOptions(workflows.PurgeWorkflow, workflow.RegisterOptions{Name: contract.WorkflowPurge})
	w.RegisterWorkflowWithOptions(notification.LookupWorkflow, workflow.RegisterOptions{Name: contract.WorkflowLookupNotification})
	w.RegisterActivity(activities.NewMirrorActivities(store))
	w.RegisterActivity(&activities.AuditActivities{Store: store})
	w.RegisterActivity(&activities.SettleActivities{Client: tc, Store: store})
	w.RegisterActivity(&activities.PurgeActivities{Store: store, Retention: cfg.Retention})
	if err := SeedLists(ctx, store, cfg.Lists); err != nil {
		store.Close()
		return nil, err
	}
	w.RegisterActivity(&notification.Activities{
		Store:    store,
		Adapters: NewAdapters(cfg.Mailer, opts.Identity, log.Named("webhook")),
		Link: func(id string) string {
			return operator.WebUIURL(cfg.TemporalUIURL, cfg.Namespace, contract.NotificationWorkflowID(id), "")
		},
		Policy: policy,
	})
	page, err := startCentralHTTP(cfg, store, tc, registry, events, log.Named("outbox"))
	if err != nil {
		store.Close()
		return nil, err
	}
	purge := func(ctx context.Context) error { return EnsurePurgeSchedule(ctx, tc, cfg.Region) }
	return &Central{worker: w, store: store, http: page, purge: purge, log: log}, nil
}

// workerIdentity is the identity this process's central worker polls queue
// with, in the SDK's own form (pid@host@task queue): Temporal's history
// names it in each attempt's ActivityTaskStarted event, and the mailer in
// each email's notification.HeaderWorker.
func workerIdentity(queue string) string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%d@%s@%s", os.Getpid(), host, queue)
}

// notificationPolicy is the retry policy of a notification's delivery.
func notificationPolicy(cfg CentralOptions) contract.RetryPolicy {
	return contract.RetryPolicy{
		Interval: cfg.MailRetryInterval, MaxRetries: cfg.MailMaxRetries,
		// Connecting and the commands take up to a timeout each, the final
		// reply its own; leave room for the store writes around them (the
		// first attempt also records the central row).
		AttemptTimeout: 2*cfg.Mailer.Timeout + cfg.Mailer.FinalReplyTimeout + 30*time.Second,
	}
}

// Addr is where the outbox page, /metrics, /healthz and /readyz are served.
func (c *Central) Addr() string { return c.http.listener.Addr().String() }

// OpenCentralStore opens the central store opts name.
func OpenCentralStore(ctx context.Context, opts StoreOptions) (*centralstore.Store, error) {
	switch opts.Driver {
	case DriverSQLServer:
		return centralstore.OpenSQLServer(ctx, opts.DSN)
	case DriverPostgres:
		return centralstore.OpenPostgres(ctx, opts.DSN)
	default:
		return centralstore.OpenSQLite(ctx, opts.Path)
	}
}

// Run polls for tasks until ctx ends.
func (c *Central) Run(ctx context.Context) error {
	defer c.store.Close()
	served := make(chan error, 1)
	go func() { served <- c.http.serve() }()
	if err := c.worker.Start(); err != nil {
		return errors.Join(fmt.Errorf("start central worker: %w", err), c.http.shutdown(), <-served)
	}
	purged := make(chan struct{})
	go func() {
		defer close(purged)
		c.keepPurgeScheduled(ctx)
	}()
	<-ctx.Done()
	c.worker.Stop()
	<-purged
	return errors.Join(c.http.shutdown(), <-served)
}

// purgeScheduleRetry bounds the wait between tries of the purge schedule.
const purgeScheduleRetry = time.Minute

// keepPurgeScheduled ensures the purge schedule, trying again (after 1 s,
// doubling up to purgeScheduleRetry) until it succeeds or ctx ends. It runs
// beside the worker, not before it: the schedule is a daily chore, and a
// Temporal too busy to answer a schedule update within its deadline (a
// restart during a burst) kept a restarted worker from delivering at all.
func (c *Central) keepPurgeScheduled(ctx context.Context) {
	for wait := time.Second; ; wait = min(2*wait, purgeScheduleRetry) {
		err := c.purge(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		c.log.Warn("purge schedule not ensured; the worker delivers meanwhile and tries again",
			zap.Duration("retryIn", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// EnsurePurgeSchedule creates the region's Temporal Schedule (outpost-purge,
// or outpost-purge-<region>), which runs PurgeWorkflow on the region's task
// queue daily at 03:00 UTC (skipping a run while the previous one is still
// going), or brings an existing one's spec and action in line. Operators
// see it, pause it and trigger it on the Web UI's Schedules page; an update
// keeps a pause.
func EnsurePurgeSchedule(ctx context.Context, tc client.Client, region contract.Region) error {
	id := region.PurgeScheduleID()
	spec := client.ScheduleSpec{Calendars: []client.ScheduleCalendarSpec{{
		Hour: []client.ScheduleRange{{Start: 3}}, Comment: "daily at 03:00 UTC",
	}}}
	action := &client.ScheduleWorkflowAction{
		ID: id, Workflow: contract.WorkflowPurge, TaskQueue: region.TaskQueue(),
		WorkflowRunTimeout: 6 * time.Hour,
	}
	if region.Name != "" {
		action.TypedSearchAttributes = temporal.NewSearchAttributes(temporalcontract.AttrRegion.ValueSet(region.Name))
	}
	return schedule.Ensure(ctx, tc, client.ScheduleOptions{
		ID: id, Spec: spec, Action: action, Overlap: enums.SCHEDULE_OVERLAP_POLICY_SKIP,
		Note: "Deletes terminal notifications and site_calls rows and audit_log rows past central.retention; trigger it to purge now.",
	})
}

// EnsureSearchAttributes registers Outpost's search attributes in namespace
// unless they exist. Idempotent; on Temporal Cloud register them in the
// namespace settings instead.
func EnsureSearchAttributes(ctx context.Context, tc client.Client, namespace string, log *zap.Logger) error {
	ops := tc.OperatorService()
	existing, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	missing := map[string]enums.IndexedValueType{}
	for _, key := range temporalcontract.SearchAttributes {
		if _, ok := existing.GetCustomAttributes()[key.GetName()]; !ok {
			missing[key.GetName()] = enums.INDEXED_VALUE_TYPE_KEYWORD
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: missing})
	if err != nil {
		return fmt.Errorf("register search attributes %v in namespace %s (on Temporal Cloud, add them in the namespace settings): %w", keys(missing), namespace, err)
	}
	log.Info("registered search attributes", zap.Strings("names", keys(missing)))
	return awaitSearchAttributesUsable(ctx, tc, namespace, keys(missing))
}

// searchAttributesDeadline bounds the wait for new search attributes to be
// usable: the frontends refresh their namespace cache every 10s by default.
const searchAttributesDeadline = time.Minute

// awaitSearchAttributesUsable waits until a visibility query naming each of
// names is accepted. On SQL visibility a new attribute's column mapping
// reaches the frontends only with their next namespace refresh; until then
// a schedule or workflow start carrying it is refused ("has no mapping
// defined for search attribute"), and a fresh central of a region would
// fail creating its purge schedule.
func awaitSearchAttributesUsable(ctx context.Context, tc client.Client, namespace string, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, searchAttributesDeadline)
	defer cancel()
	for _, name := range names {
		query := fmt.Sprintf("%s = %q", name, "")
		for {
			_, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: query})
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("search attribute %s registered in namespace %s but not yet usable (%v): start central again in a minute", name, namespace, err)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return nil
}

func keys(m map[string]enums.IndexedValueType) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
