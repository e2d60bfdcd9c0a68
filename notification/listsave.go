package notification

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/internal/centralstore"
)

// ErrInvalid is a list or channel definition CheckList or CheckChannel
// refused: nothing was written.
var ErrInvalid = errors.New("invalid definition")

// SaveList checks changed and, when it differs from old (existed: old is
// in the store), writes it as by's change, audited with what changed. It
// returns the change, "" when there was none.
func SaveList(ctx context.Context, store *centralstore.Store, old, changed centralstore.List, existed bool, by string) (string, error) {
	channels, err := ChannelsByName(ctx, store)
	if err != nil {
		return "", err
	}
	change, err := PlanList(old, changed, existed, channels)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return change.Diff, change.Write(ctx, store, by)
}

// SaveChannel is SaveList for a delivery channel.
func SaveChannel(ctx context.Context, store *centralstore.Store, old, changed centralstore.Channel, existed bool, by string) (string, error) {
	change, err := PlanChannel(old, changed, existed)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return change.Diff, change.Write(ctx, store, by)
}

// ListChange is a checked list and what writing it over the stored one
// changes: Diff is "" when nothing does, and Write then writes nothing.
type ListChange struct {
	List centralstore.List
	Diff string
}

// PlanList checks changed (CheckList, against channels) and says what
// writing it over old (existed: old is in the store) changes.
func PlanList(old, changed centralstore.List, existed bool, channels map[string]centralstore.Channel) (ListChange, error) {
	checked, err := CheckList(changed, channels)
	if err != nil {
		return ListChange{}, err
	}
	return ListChange{List: checked, Diff: ListDiff(old, checked, existed)}, nil
}

// Write writes the change as by's, audited with its diff.
func (c ListChange) Write(ctx context.Context, store *centralstore.Store, by string) error {
	if c.Diff == "" {
		return nil
	}
	c.List.UpdatedBy, c.List.UpdatedAt = by, time.Now()
	return store.PutList(ctx, c.List, c.Diff)
}

// ChannelChange is ListChange for a delivery channel.
type ChannelChange struct {
	Channel centralstore.Channel
	Diff    string
}

// PlanChannel is PlanList for a delivery channel.
func PlanChannel(old, changed centralstore.Channel, existed bool) (ChannelChange, error) {
	checked, err := CheckChannel(changed)
	if err != nil {
		return ChannelChange{}, err
	}
	return ChannelChange{Channel: checked, Diff: ChannelDiff(old, checked, existed)}, nil
}

// Write writes the change as by's, audited with its diff.
func (c ChannelChange) Write(ctx context.Context, store *centralstore.Store, by string) error {
	if c.Diff == "" {
		return nil
	}
	c.Channel.UpdatedBy, c.Channel.UpdatedAt = by, time.Now()
	return store.PutChannel(ctx, c.Channel, c.Diff)
}

// ChannelsByName reads every channel, for CheckList.
func ChannelsByName(ctx context.Context, store *centralstore.Store) (map[string]centralstore.Channel, error) {
	all, err := store.Channels(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]centralstore.Channel, len(all))
	for _, c := range all {
		byName[c.Name] = c
	}
	return byName, nil
}
