// Package delivery holds the adapters that deliver a notification to its
// list's resolved targets, one per notification type (Email, Teams,
// Webhook), and the rules a list or channel definition must follow.
//
// The Email adapter is *mailer.Mailer. An adapter reports a failure as
// *Error (Teams, Webhook) or *mailer.SendError (Email): permanent failures park the notification at
// once, any other failure is retried at the SMTP policy's fixed interval, or
// later when the receiver asked for that with Retry-After.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// Message is one attempt to deliver a notification, as the adapters take
// it: the notification, its list's targets resolved for this attempt, and
// the list's channel.
type Message struct {
	ID             string // the notification id
	Subject        string
	Body           string
	SourceSite     string
	SourceInstance string
	SourceScript   string
	SiteEnqueuedAt time.Time
	// List names the notification's list; ListData is its type data
	// (TeamsData, WebhookData) as JSON, "" for none.
	List     string
	ListData string
	// Targets are the list's targets with every env: target read from the
	// environment.
	Targets []string
	// Channel is the list's delivery channel; nil when it names none.
	Channel *Channel
	// Link opens the notification in the Temporal Web UI ("" when unknown).
	Link string
}

// Channel is a list's delivery channel as an adapter reads it.
type Channel struct {
	Name string
	// Settings are its SMTPSettings or WebhookSettings as JSON.
	Settings string
}

// Adapter delivers notifications of one type.
type Adapter interface {
	Deliver(ctx context.Context, m Message) error
}

// Adapters maps a notification type to its adapter.
type Adapters map[string]Adapter

// For is the adapter of list, of type listType; a type this worker cannot
// deliver is a permanent *Error.
func (a Adapters) For(listType, list string) (Adapter, error) {
	adapter, ok := a[listType]
	if !ok {
		return nil, &Error{Permanent: true, Err: fmt.Errorf("list %q has type %q, which this central worker cannot deliver (it knows %s)",
			list, listType, strings.Join(contract.NotificationTypes(), ", "))}
	}
	return adapter, nil
}

// Error is a failed Teams or webhook delivery.
type Error struct {
	// Permanent: the receiver refused the notification itself; sending it
	// again would fail the same way.
	Permanent bool
	// Misconfigured: the failure is the list's or its channel's on this
	// worker (an unset or invalid secret), not the receiver's; always
	// Permanent.
	Misconfigured bool
	// RetryAfter is how long the receiver asked to wait (429, 503), capped
	// at MaxRetryAfter; 0 when it did not ask.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// MaxRetryAfter caps a receiver's Retry-After, so that a wrong header
// cannot hold a notification back for days.
const MaxRetryAfter = time.Hour

// envPrefix marks a target read from the environment: "env:OPS_TEAMS_URL".
const envPrefix = "env:"

// ResolveTargets reads every env: target of targets from the environment.
// A variable that is unset fails: the operator must set it on every
// central worker (or change the list).
func ResolveTargets(targets []string) ([]string, error) {
	out := make([]string, 0, len(targets))
	for _, t := range targets {
		name, fromEnv := strings.CutPrefix(t, envPrefix)
		if !fromEnv {
			out = append(out, t)
			continue
		}
		v := os.Getenv(name)
		if v == "" {
			return nil, fmt.Errorf("target %s: $%s is not set on this central worker", t, name)
		}
		out = append(out, v)
	}
	return out, nil
}

// errNoChannel is a Webhook list without a webhook channel to sign with.
var errNoChannel = errors.New("has no webhook channel: set the list's channel to one with a secret_env")
