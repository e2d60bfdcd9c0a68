package airgapsync

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
)

func TestHandOffRetriesOnlyWhatMaySucceed(t *testing.T) {
	for _, tt := range []struct {
		name      string
		failures  []error // what the tries return before they succeed
		wantCalls int
		wantErr   bool
	}{
		{"a slow central, then an answer", []error{context.DeadlineExceeded, serviceerror.NewUnavailable("busy")}, 3, false},
		{"refused for good", []error{serviceerror.NewInvalidArgument("too big")}, 1, true},
		{"already started", []error{serviceerror.NewWorkflowExecutionAlreadyStarted("ran", "", "")}, 1, true},
		{"down throughout", []error{errors.New("1"), errors.New("2"), errors.New("3"), errors.New("4"), errors.New("5"), errors.New("6")}, handOffAttempts, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := retryTransient(context.Background(), time.Millisecond, func() error {
				calls++
				if calls <= len(tt.failures) {
					return tt.failures[calls-1]
				}
				return nil
			})
			if calls != tt.wantCalls || (err != nil) != tt.wantErr {
				t.Errorf("%d calls, error %v; want %d calls, error %v", calls, err, tt.wantCalls, tt.wantErr)
			}
		})
	}
}
