// Module workflowcheck pins Temporal's static determinism checker as a Go
// tool, apart from the main module so its analysis dependencies stay out of
// Outpost's. workflows/determinism_test.go builds and runs it.
module github.com/outpost-dev/outpost/dev/workflowcheck

go 1.26

tool go.temporal.io/sdk/contrib/tools/workflowcheck

require (
	go.temporal.io/sdk/contrib/tools/workflowcheck v0.6.0 // indirect
	golang.org/x/mod v0.30.0 // indirect
	golang.org/x/sync v0.19.0 // indirect
	golang.org/x/tools v0.39.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)
