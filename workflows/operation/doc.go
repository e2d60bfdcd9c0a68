// Package operation holds the deterministic building blocks the workflows
// of an operation share: the notification's (package notification) and
// the cached call's (package workflows). They are the worker generation a
// workflow task runs under and the status a workflow shows, central-store
// writes, duplicate submits, and the operator's retry, discard or cancel
// of a parked operation. Code here runs inside workflows: it must stay
// deterministic (TestWorkflowsAreDeterministic runs workflowcheck on it),
// and it imports only contract, temporalcontract, internal/callstate and
// the Temporal SDK.
package operation
