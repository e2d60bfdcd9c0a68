package targetexec

import (
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/targets"
)

// newExecutor is an executor of the given definitions.
func newExecutor(systems map[string]targets.ExternalSystem, databases map[string]targets.Database) *Executor {
	return New(targets.New(systems, databases))
}

func call(system, method string, params map[string]any) targets.Request {
	return targets.Request{Kind: contract.KindExternalCall, System: system, Method: method, Params: params}
}

func write(conn, sql string, args ...any) targets.Request {
	return targets.Request{Kind: contract.KindDatabaseWrite, Connection: conn, SQL: sql, Args: args}
}
