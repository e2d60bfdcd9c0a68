package notification

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

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
