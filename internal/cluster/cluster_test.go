package cluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/internal/cluster"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
)

// Two server processes form one cluster: each lists both as members of
// every service, each frontend serves the namespace over mutual TLS and
// refuses a client without a certificate, and a node killed and restarted
// joins again.
func TestTwoNodesFormOneCluster(t *testing.T) {
	log := zaptest.NewLogger(t)
	c := cluster.StartForTest(t, "outpost", log)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	first, err := c.Members(ctx, 0)
	require.NoError(t, err)
	second, err := c.Members(ctx, 1)
	require.NoError(t, err)
	for _, svc := range []string{"frontend", "history", "matching", "worker"} {
		require.Len(t, first[svc], 2, "node 0's %s ring", svc)
		slices.Sort(first[svc])
		slices.Sort(second[svc])
		require.Equal(t, first[svc], second[svc], "both nodes see the same %s members", svc)
	}

	for node := range cluster.Nodes {
		cl, err := fromconfig.DialTemporal(c.Temporal(node, config.Default().Temporal), log, nil, nil)
		require.NoError(t, err, "node %d", node)
		ns, err := cl.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "outpost"})
		require.NoError(t, err, "node %d", node)
		require.Equal(t, "outpost", ns.GetNamespaceInfo().GetName())
		_, err = cl.DescribeTaskQueue(ctx, "probe", enums.TASK_QUEUE_TYPE_WORKFLOW)
		require.NoError(t, err, "node %d serves the namespace", node)
		cl.Close()
	}

	noCert := c.Temporal(0, config.Default().Temporal)
	noCert.TLSCertFile, noCert.TLSKeyFile = "", ""
	_, err = fromconfig.DialTemporal(noCert, log, nil, nil)
	require.ErrorContains(t, err, "TLS without a client certificate")

	require.NoError(t, c.Kill(0))
	require.NoError(t, c.AwaitMembers(ctx, 1), "node 1 notices node 0 is gone")
	require.NoError(t, c.Restart(ctx, 0))
	require.NoError(t, c.AwaitMembers(ctx, 2))
}
