package callstate

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// Every (status, event) pair: where it leaves a cached call, or that it does
// not apply. retries counts the attempt that ended (0: the site's immediate
// attempt), out of maxRetries 3.
func TestNextCoversEveryStatusAndEvent(t *testing.T) {
	t.Parallel()
	const none = contract.Status("") // the event does not apply
	type key struct {
		status  contract.Status
		event   Event
		retries int
	}
	want := map[key]contract.Status{}
	for _, s := range contract.Statuses() {
		for _, e := range Events() {
			for _, r := range []int{0, 1, 3} {
				want[key{s, e, r}] = none
			}
		}
	}
	for _, s := range []contract.Status{contract.StatusPending, contract.StatusRetrying} {
		for _, r := range []int{0, 1, 3} {
			want[key{s, Delivered, r}] = contract.StatusDelivered
			want[key{s, Cancelled, r}] = contract.StatusDiscarded
		}
		want[key{s, FailedTransient, 1}] = contract.StatusRetrying
		want[key{s, FailedTransient, 3}] = contract.StatusParked // retries used up
		want[key{s, FailedPermanent, 1}] = contract.StatusParked
		want[key{s, FailedPermanent, 3}] = contract.StatusParked
	}
	// The immediate attempt (Pending, retry 0): a transient failure queues
	// the call for retry, a permanent one fails it at once.
	want[key{contract.StatusPending, FailedTransient, 0}] = contract.StatusPending
	want[key{contract.StatusPending, FailedPermanent, 0}] = contract.StatusFailed
	for _, r := range []int{0, 1, 3} {
		want[key{contract.StatusParked, OperatorRetry, r}] = contract.StatusRetrying
		want[key{contract.StatusParked, OperatorDiscard, r}] = contract.StatusDiscarded
		want[key{contract.StatusParked, Cancelled, r}] = contract.StatusDiscarded
	}
	// Retrying after an operator's retry counts from 0 again; its retries
	// follow the rule with the count as it stands.
	want[key{contract.StatusRetrying, FailedTransient, 0}] = contract.StatusRetrying
	want[key{contract.StatusRetrying, FailedPermanent, 0}] = contract.StatusParked
	require.Len(t, want, 8*6*3, "every status, event and retry count")
	for k, w := range want {
		got, ok := Next(k.status, k.event, k.retries, 3)
		name := fmt.Sprintf("%s on %s after retry %d", k.event, k.status, k.retries)
		if w == none {
			require.False(t, ok, "%s applies (→ %s)", name, got)
			require.Equal(t, k.status, got, "%s must leave the status", name)
			continue
		}
		require.True(t, ok, "%s does not apply", name)
		require.Equal(t, w, got, name)
	}
	for _, s := range contract.Statuses() {
		_, attempts := Next(s, Delivered, 1, 3)
		require.Equal(t, attempts, Retryable(s), "Retryable(%s) says whether an attempt applies", s)
	}
}

// A notification's attempts follow the same rule as a cached call's retries.
func TestAfterFailedAttempt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		retries, max int
		permanent    bool
		want         contract.Status
	}{
		{0, 3, false, contract.StatusRetrying},
		{2, 3, false, contract.StatusRetrying},
		{3, 3, false, contract.StatusParked},
		{0, 0, false, contract.StatusParked},
		{0, 3, true, contract.StatusParked},
	} {
		require.Equal(t, c.want, AfterFailedAttempt(c.retries, c.max, c.permanent), "%+v", c)
	}
}

// The rules are one package the workflows can import: it links neither the
// targets nor anything else that does I/O.
func TestCallstateImportsNoIO(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.ElementsMatch(t, []string{"github.com/outpost-dev/outpost/contract", "github.com/outpost-dev/outpost/internal/callstate"},
		strings.Fields(string(out)))
}
