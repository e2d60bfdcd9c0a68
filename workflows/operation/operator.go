package operation

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
)

// IgnoreDuplicateSubmits consumes later submits: the first one (or the
// start's input) wins.
func IgnoreDuplicateSubmits(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, contract.SignalSubmit)
		for {
			ch.Receive(ctx, nil)
			workflow.GetLogger(ctx).Info("duplicate submit ignored")
		}
	})
}

// DrainStaleSignals drops retry/discard signals sent while the operation
// was not parked, so an old click never acts on a later park.
func DrainStaleSignals(chs ...workflow.ReceiveChannel) {
	for _, ch := range chs {
		for ch.ReceiveAsync(nil) {
		}
	}
}

// WaitForOperator blocks until retry (true) or discard (false) arrives. A
// cancel request (the Web UI's Cancel, `temporal workflow cancel`) is a
// discard too: CancelledAction, with ctx cancelled.
func WaitForOperator(ctx workflow.Context, retryCh, discardCh workflow.ReceiveChannel) (contract.OperatorAction, bool) {
	var action contract.OperatorAction
	retry := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(retryCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &action); retry = true })
	sel.AddReceive(discardCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &action) })
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { action = CancelledAction })
	sel.Select(ctx)
	return action, retry
}

// CancelledAction is the discard a cancel request stands for. The request
// carries no operator or reason the workflow can read; the Web UI and the
// temporal CLI record who sent it in the history's WorkflowExecutionCancelRequested event.
var CancelledAction = contract.OperatorAction{Reason: "workflow cancelled (Web UI Cancel or temporal workflow cancel), taken as a discard; " +
	"who asked is in the history's cancel request"}

// AfterCancel is a context for the work that ends a cancelled workflow
// properly (the discard's store writes): ctx itself is cancelled, and
// anything run on it would fail at once.
func AfterCancel(ctx workflow.Context) workflow.Context {
	if ctx.Err() == nil {
		return ctx
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return dctx
}

// SetDetails puts why the operation waits in the workflow's current
// details, which the Web UI shows on the workflow page: an operator sees
// "Parked: <last error>" without opening the history. It records nothing
// in the history.
func SetDetails(ctx workflow.Context, status contract.Status, retryCount int, lastError string) {
	switch status {
	case contract.StatusParked:
		workflow.SetCurrentDetails(ctx, "Parked: "+lastError+
			"\n\nSend signal retry (deliver again) or discard, input {} or {\"operator\":\"…\",\"reason\":\"…\"}.")
	case contract.StatusRetrying:
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Retrying (%d so far): %s", retryCount, lastError))
	default:
		workflow.SetCurrentDetails(ctx, "")
	}
}
