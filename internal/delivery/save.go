package delivery

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
	changed, err = CheckList(changed, channels)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	diff := ListDiff(old, changed, existed)
	if diff == "" {
		return "", nil
	}
	changed.UpdatedBy, changed.UpdatedAt = by, time.Now()
	return diff, store.PutList(ctx, changed, diff)
}

// SaveChannel is SaveList for a delivery channel.
func SaveChannel(ctx context.Context, store *centralstore.Store, old, changed centralstore.Channel, existed bool, by string) (string, error) {
	changed, err := CheckChannel(changed)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	diff := ChannelDiff(old, changed, existed)
	if diff == "" {
		return "", nil
	}
	changed.UpdatedBy, changed.UpdatedAt = by, time.Now()
	return diff, store.PutChannel(ctx, changed, diff)
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
