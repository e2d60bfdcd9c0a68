// Package workflows holds Outpost's Temporal workflows: a notification's
// delivery, a cached call's retries, telemetry ingest and reconciliation,
// and the daily purge. The names and types they share with the site, the
// stores and the tools live in package contract. Code here must stay
// deterministic (TestWorkflowsAreDeterministic runs workflowcheck).
package workflows
