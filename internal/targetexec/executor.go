// Package targetexec makes the attempts of cached calls and database
// writes at a site's targets: the HTTP client of its external systems and
// the connection pools of its databases (SQLite, SQL Server). The targets'
// definitions and the rules a request must pass are package targets';
// they are apart so that the site SDK links no HTTP client or SQL Server
// driver for a script that only notifies.
package targetexec

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/targets"
)

// Executor makes attempts at the targets of its definitions. It is safe
// for concurrent use.
type Executor struct {
	defs   *targets.Registry
	client *http.Client

	mu     sync.Mutex
	pools  map[string]*sql.DB
	closed bool
}

// New returns an executor of the targets defs defines. Database pools open
// on first use.
func New(defs *targets.Registry) *Executor {
	return &Executor{defs: defs, client: newHTTPClient(), pools: map[string]*sql.DB{}}
}

// Close closes the database pools opened so far; later writes fail.
func (e *Executor) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	e.client.CloseIdleConnections()
	var errs []error
	for name, db := range e.pools {
		if err := db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", name, err))
		}
	}
	clear(e.pools)
	return errors.Join(errs...)
}

// Execute makes one attempt at req. The error is a *targets.Failure for an
// attempt that reached, or tried to reach, the target, or a
// *targets.InvalidError for a request that cannot run (callers treat it as
// permanent).
func (e *Executor) Execute(ctx context.Context, req targets.Request) (targets.Result, error) {
	if err := e.defs.Validate(req); err != nil {
		return targets.Result{}, err
	}
	key := req.IdempotencyKey // not part of the buffered form Canonical goes through
	req, err := targets.Canonical(req)
	if err != nil {
		return targets.Result{}, &targets.InvalidError{Field: "request", Reason: err.Error()}
	}
	req.IdempotencyKey = key
	if req.Kind == contract.KindExternalCall {
		return e.call(ctx, req)
	}
	return e.write(ctx, req)
}

// redact removes a secret from a message. A "Scheme token" value is also
// redacted token alone, as a server may echo just the token.
func redact(msg, secret string) string {
	if secret == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, secret, "[redacted]")
	if _, token, ok := strings.Cut(secret, " "); ok && len(token) >= 8 {
		msg = strings.ReplaceAll(msg, token, "[redacted]")
	}
	return msg
}
