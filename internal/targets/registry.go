package targets

import (
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/contract"
)

// Defaults used when a definition leaves a field zero or is gone.
const (
	defaultTimeout    = 30 * time.Second
	defaultInterval   = time.Minute
	defaultMaxRetries = 10
	// storeMargin is added to a target's timeout to give an attempt room for
	// the site's store writes around the call.
	storeMargin = 30 * time.Second
)

// Registry holds the site's definitions: what a request may ask of them
// (Validate) and its retry policy. It makes no attempt itself, so that
// what imports it links no HTTP client or SQL driver: package
// internal/targetexec makes the attempts. It is safe for concurrent use.
type Registry struct {
	systems   map[string]ExternalSystem
	databases map[string]Database
}

// New returns a registry of the given external systems and databases.
func New(systems map[string]ExternalSystem, databases map[string]Database) *Registry {
	return &Registry{systems: maps.Clone(systems), databases: maps.Clone(databases)}
}

// ExternalSystem is the definition of the system named name.
func (r *Registry) ExternalSystem(name string) (ExternalSystem, bool) {
	sys, ok := r.systems[name]
	return sys, ok
}

// Database is the definition of the database named name.
func (r *Registry) Database(name string) (Database, bool) {
	db, ok := r.databases[name]
	return db, ok
}

// Validate returns an *InvalidError when req can never run, else nil.
func (r *Registry) Validate(req Request) error {
	switch req.Kind {
	case contract.KindExternalCall:
		if err := r.validateCall(req); err != nil {
			return err
		}
	case contract.KindDatabaseWrite:
		if err := r.validateWrite(req); err != nil {
			return err
		}
	default:
		return &InvalidError{Field: "kind", Reason: fmt.Sprintf("unknown kind %q: want %s or %s",
			req.Kind, contract.KindExternalCall, contract.KindDatabaseWrite)}
	}
	return checkValues(req)
}

func (r *Registry) validateCall(req Request) error {
	if req.System == "" {
		return &InvalidError{Field: "system", Reason: "is required"}
	}
	if req.Method == "" {
		return &InvalidError{Field: "method", Reason: "is required"}
	}
	sys, ok := r.systems[req.System]
	if !ok {
		return &InvalidError{Field: "system", Reason: fmt.Sprintf("unknown external system %q", req.System)}
	}
	m, ok := sys.Methods[req.Method]
	if !ok {
		return &InvalidError{Field: "method", Reason: fmt.Sprintf("system %q has no method %q", req.System, req.Method)}
	}
	_, _, err := ExpandPath(m.Path, req.Params)
	return err
}

func (r *Registry) validateWrite(req Request) error {
	if req.Connection == "" {
		return &InvalidError{Field: "connection", Reason: "is required"}
	}
	db, ok := r.databases[req.Connection]
	if !ok {
		return &InvalidError{Field: "connection", Reason: fmt.Sprintf("unknown database %q", req.Connection)}
	}
	if d := db.DriverOrDefault(); d != DriverSQLite && d != DriverSQLServer {
		return &InvalidError{Field: "connection", Reason: fmt.Sprintf("database %q has unknown driver %q", req.Connection, d)}
	}
	if strings.TrimSpace(req.SQL) == "" {
		return &InvalidError{Field: "sql", Reason: "is empty"}
	}
	if !utf8.ValidString(req.SQL) {
		return &InvalidError{Field: "sql", Reason: invalidUTF8}
	}
	return checkStatement(req.SQL, db, len(req.Args))
}

// Target summarises where req goes: "erp.createOrder" for a call,
// "historian" for a write.
func (r *Registry) Target(req Request) string {
	switch req.Kind {
	case contract.KindExternalCall:
		return req.System + "." + req.Method
	case contract.KindDatabaseWrite:
		return req.Connection
	}
	return ""
}

// Policy is req's retry policy from its definition, or a default (1m, 10
// retries, 60s per attempt) when the definition is gone.
func (r *Registry) Policy(req Request) contract.RetryPolicy {
	switch req.Kind {
	case contract.KindExternalCall:
		if sys, ok := r.systems[req.System]; ok {
			return policy(sys.RetryInterval, sys.MaxRetries, sys.Timeout)
		}
	case contract.KindDatabaseWrite:
		if db, ok := r.databases[req.Connection]; ok {
			return policy(db.RetryInterval, db.MaxRetries, db.Timeout)
		}
	}
	return policy(0, defaultMaxRetries, 0)
}

// LongestAttempt is the longest time any definition's attempt may take
// (its AttemptTimeout): how far ahead of the clock an immediate attempt's
// buffer row can legitimately be scheduled.
func (r *Registry) LongestAttempt() time.Duration {
	longest := policy(0, 0, 0).AttemptTimeout
	for _, sys := range r.systems {
		longest = max(longest, policy(sys.RetryInterval, sys.MaxRetries, sys.Timeout).AttemptTimeout)
	}
	for _, db := range r.databases {
		longest = max(longest, policy(db.RetryInterval, db.MaxRetries, db.Timeout).AttemptTimeout)
	}
	return longest
}

func policy(interval time.Duration, maxRetries int, timeout time.Duration) contract.RetryPolicy {
	if interval <= 0 {
		interval = defaultInterval
	}
	return contract.RetryPolicy{Interval: interval, MaxRetries: maxRetries, AttemptTimeout: timeoutOr(timeout) + storeMargin}
}

func timeoutOr(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultTimeout
	}
	return d
}
