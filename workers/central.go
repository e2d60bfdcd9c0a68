// Package workers assembles Outpost's Temporal workers.
package workers

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/mailer"
	"github.com/outpost-dev/outpost/workflows"
)

// Central is the central worker on task queue outpost-central.
type Central struct {
	worker worker.Worker
	store  *centralstore.Store
}

// NewCentral opens the central store and registers the workflows and
// activities with a worker on tc.
func NewCentral(ctx context.Context, cfg config.Central, tc client.Client) (*Central, error) {
	store, err := OpenCentralStore(ctx, cfg.Store)
	if err != nil {
		return nil, err
	}
	w := worker.New(tc, workflows.CentralTaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(workflows.NotificationWorkflow, workflow.RegisterOptions{Name: "NotificationWorkflow"})
	w.RegisterWorkflowWithOptions(workflows.CachedCallWorkflow, workflow.RegisterOptions{Name: "CachedCallWorkflow"})
	w.RegisterWorkflowWithOptions(workflows.IngestTelemetryWorkflow, workflow.RegisterOptions{Name: "IngestTelemetryWorkflow"})
	w.RegisterWorkflowWithOptions(workflows.ReconcileSiteWorkflow, workflow.RegisterOptions{Name: "ReconcileSiteWorkflow"})
	w.RegisterActivity(&activities.MirrorActivities{Store: store})
	w.RegisterActivity(&activities.NotificationActivities{
		Store:  store,
		Sender: mailer.New(cfg.Mailer()),
		Lists: func(name string) ([]string, bool) {
			r, ok := cfg.Lists[name]
			return r, ok
		},
		Policy: workflows.RetryPolicy{
			Interval: cfg.SMTP.RetryInterval, MaxRetries: cfg.SMTP.MaxRetries,
			// The attempt's own deadline is the SMTP timeout; leave room for
			// the store writes around it.
			AttemptTimeout: cfg.SMTP.Timeout + 30*time.Second,
		},
	})
	return &Central{worker: w, store: store}, nil
}

// OpenCentralStore opens the configured central store.
func OpenCentralStore(ctx context.Context, cfg config.CentralStore) (*centralstore.Store, error) {
	if cfg.Driver == config.DriverSQLServer {
		dsn, err := cfg.SQLServerDSN()
		if err != nil {
			return nil, err
		}
		return centralstore.OpenSQLServer(ctx, dsn)
	}
	return centralstore.OpenSQLite(ctx, cfg.Path)
}

// Run polls for tasks until ctx ends.
func (c *Central) Run(ctx context.Context) error {
	defer c.store.Close()
	if err := c.worker.Start(); err != nil {
		return fmt.Errorf("start central worker: %w", err)
	}
	<-ctx.Done()
	c.worker.Stop()
	return nil
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
	for _, key := range workflows.SearchAttributes {
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
	return nil
}

func keys(m map[string]enums.IndexedValueType) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
