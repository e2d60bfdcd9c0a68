// Package workflows holds Outpost's Temporal workflows but the
// notification's (package notification, beside its activities): a cached
// call's retries, telemetry ingest and reconciliation, and the daily purge.
// The building blocks the cached call's workflow shares with the
// notification's are in workflows/operation. The names and types they share
// with the site, the stores and the tools live in package contract. Code
// here must stay deterministic (TestWorkflowsAreDeterministic runs
// workflowcheck).
package workflows
