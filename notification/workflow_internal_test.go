package notification

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// An attempt that outlived its timeout reads "timed out" whichever side
// ended it first: Temporal's timer, or the attempt returning its context's
// deadline error (which crosses Temporal as an ApplicationError). Other
// errors keep the attempt's own message. An attempt whose worker stopped
// heartbeating reads "lost".
func TestDescribeTimedOutAttempts(t *testing.T) {
	overTheWire := func(err error) error {
		fc := temporal.GetDefaultFailureConverter()
		return fc.FailureToError(fc.ErrorToFailure(err))
	}
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"the attempt returned its context's error": {
			overTheWire(context.DeadlineExceeded), "delivery attempt timed out: context deadline exceeded"},
		"the first attempt returned its context's error, with the row it recorded": {
			overTheWire(temporalcontract.WithRecorded(context.DeadlineExceeded, contract.RecordNotificationResult{})),
			"delivery attempt timed out: context deadline exceeded"},
		"Temporal's timer fired": {
			temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), "delivery attempt timed out: "},
		"the worker stopped heartbeating": {
			temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), "delivery attempt lost: its worker stopped heartbeating"},
		"a refused connection": {
			overTheWire(fmt.Errorf("smtp send: %w", errors.New("connection refused"))), "smtp send: connection refused"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, describe(tc.err), tc.want)
		})
	}
}

// Generation 2 and later skip the version check; generation 4 and later
// make the first attempt a local activity.
func TestGenerationDecisions(t *testing.T) {
	for g, want := range map[int][2]bool{0: {false, false}, 1: {false, false}, 2: {true, false}, 3: {true, false}, 4: {true, true}, 5: {true, true}} {
		if got := versionMarkersRetired(g); got != want[0] {
			t.Errorf("versionMarkersRetired(%d) = %v, want %v", g, got, want[0])
		}
		if got := firstAttemptLocal(g); got != want[1] {
			t.Errorf("firstAttemptLocal(%d) = %v, want %v", g, got, want[1])
		}
	}
}
