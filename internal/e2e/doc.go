// Package e2e holds Outpost's end-to-end tests: the real Temporal dev server
// (the pinned CLI), a real SMTP server in process, real SQLite files and the
// site's real HTTP API. Each test runs its own dev server, so tests never
// share workers or task queues.
package e2e
