package callstate

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/targets"
)

// Every attempt outcome a cached call can meet, and where each leaves it.
var (
	transient = &targets.Failure{Code: 503, Message: "HTTP 503 Service Unavailable"}
	permanent = &targets.Failure{Permanent: true, Code: 400, Message: "HTTP 400 Bad Request"}
	invalid   = &targets.InvalidError{Field: "params.id", Reason: "missing"}
	network   = &targets.Failure{Message: "dial tcp: connection refused", Err: errors.New("connection refused")}
)

func TestImmediateOutcome(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		status  contract.Status
		lastErr string
	}{
		{"delivered", nil, contract.StatusDelivered, ""},
		{"transient: queued for retry", transient, contract.StatusPending, transient.Error()},
		{"network failure: queued for retry", network, contract.StatusPending, network.Error()},
		{"permanent: failed, never retried", permanent, contract.StatusFailed, permanent.Error()},
		{"invalid request: failed", invalid, contract.StatusFailed, invalid.Error()},
		{"an error the targets did not classify: failed", errors.New("boom"), contract.StatusFailed, "boom"},
	} {
		status, lastErr := ImmediateOutcome(c.err)
		require.Equal(t, c.status, status, c.name)
		require.Equal(t, c.lastErr, lastErr, c.name)
	}
}

func TestRetryOutcome(t *testing.T) {
	const max = 3
	for _, c := range []struct {
		name    string
		err     error
		retries int
		status  contract.Status
		lastErr string
	}{
		{"delivered on the first retry", nil, 1, contract.StatusDelivered, ""},
		{"delivered on the last retry", nil, max, contract.StatusDelivered, ""},
		{"transient with retries left", transient, 1, contract.StatusRetrying, transient.Error()},
		{"transient on the one before last", transient, max - 1, contract.StatusRetrying, transient.Error()},
		{"transient on the last retry: parked", transient, max, contract.StatusParked, "retries exhausted (3): " + transient.Error()},
		{"permanent on the first retry: parked at once", permanent, 1, contract.StatusParked, "permanent failure: " + permanent.Error()},
		{"invalid on a retry: parked at once", invalid, 2, contract.StatusParked, "permanent failure: " + invalid.Error()},
	} {
		status, lastErr := RetryOutcome(c.err, c.retries, max)
		require.Equal(t, c.status, status, c.name)
		require.Equal(t, c.lastErr, lastErr, c.name)
	}
	status, _ := RetryOutcome(transient, 1, 0)
	require.Equal(t, contract.StatusParked, status, "a policy of no retries parks the first retry's failure")
}

func TestNextAttemptAt(t *testing.T) {
	at := time.Date(2026, 1, 31, 14, 0, 0, 0, time.UTC)
	interval := time.Minute
	for _, c := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"one interval", transient, time.Minute},
		{"a shorter Retry-After waits the interval", &targets.Failure{Code: 429, RetryAfter: time.Second}, time.Minute},
		{"a longer Retry-After is honoured", &targets.Failure{Code: 429, RetryAfter: 5 * time.Minute}, 5 * time.Minute},
		{"capped at ten intervals", &targets.Failure{Code: 503, RetryAfter: 24 * time.Hour}, 10 * time.Minute},
		{"any other error: one interval", errors.New("boom"), time.Minute},
	} {
		require.Equal(t, at.Add(c.want), NextAttemptAt(at, interval, c.err), c.name)
	}
}

func TestWhichStatusesTakeAnAttempt(t *testing.T) {
	want := map[contract.Status]bool{
		contract.StatusPending: true, contract.StatusRetrying: true,
		contract.StatusForwarding: false, contract.StatusParked: false, contract.StatusDelivered: false,
		contract.StatusDiscarded: false, contract.StatusFailed: false,
	}
	for status, attempt := range want {
		require.Equal(t, attempt, Retryable(status), status)
	}
}

func TestImmediateWasLast(t *testing.T) {
	attempted := time.Now()
	for _, c := range []struct {
		name string
		row  contract.TrackedOperation
		max  int
		want bool
	}{
		{"no retries allowed after a finished immediate attempt", contract.TrackedOperation{Status: contract.StatusPending, LastAttemptAt: &attempted}, 0, true},
		{"retries left", contract.TrackedOperation{Status: contract.StatusPending, LastAttemptAt: &attempted}, 2, false},
		{"the immediate attempt never finished: the retry stands in for it", contract.TrackedOperation{Status: contract.StatusPending}, 0, false},
		{"retrying on the site already", contract.TrackedOperation{Status: contract.StatusRetrying, LastAttemptAt: &attempted, RetryCount: 2}, 2, false},
	} {
		require.Equal(t, c.want, ImmediateWasLast(c.row, contract.RetryPolicy{MaxRetries: c.max}), c.name)
	}
}
