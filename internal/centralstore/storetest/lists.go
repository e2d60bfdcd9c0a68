package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// listsAndChannels: a list and a channel are created, replaced and removed,
// each change audited with who made it.
func listsAndChannels(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	name := "l-" + uuid.NewString()[:8]
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	l := centralstore.List{Name: name, Type: contract.NotificationTypeEmail, Targets: []string{"a@example.com"},
		TypeData: "{}", Description: "shift leads", UpdatedBy: "alice", UpdatedAt: at}
	require.NoError(t, store.PutList(ctx, l, "created"))
	got, err := store.GetList(ctx, name)
	require.NoError(t, err)
	require.Equal(t, l, got)

	l.Targets, l.UpdatedBy, l.UpdatedAt = []string{"b@example.com", "c@example.com"}, "bob", at.Add(time.Hour)
	require.NoError(t, store.PutList(ctx, l, "targets: +b@example.com +c@example.com -a@example.com"))
	got, err = store.GetList(ctx, name)
	require.NoError(t, err)
	require.Equal(t, []string{"b@example.com", "c@example.com"}, got.Targets)
	all, err := store.Lists(ctx)
	require.NoError(t, err)
	require.Contains(t, all, got)

	require.NoError(t, store.DeleteList(ctx, name, "carol"))
	_, err = store.GetList(ctx, name)
	require.ErrorIs(t, err, centralstore.ErrNotFound)
	require.ErrorIs(t, store.DeleteList(ctx, name, "carol"), centralstore.ErrNotFound)

	events, err := store.ListAuditEvents(ctx, centralstore.ListOperationID(name))
	require.NoError(t, err)
	require.Len(t, events, 3)
	var who []string
	for _, e := range events {
		require.Equal(t, centralstore.AuditKindList, e.Kind)
		who = append(who, e.Operator+":"+string(e.Event))
	}
	require.Equal(t, []string{"alice:Changed", "bob:Changed", "carol:Removed"}, who)
	require.Contains(t, events[1].Detail, "+b@example.com")

	c := centralstore.Channel{Name: "c-" + uuid.NewString()[:8], Type: centralstore.ChannelWebhook,
		Settings: `{"secret_env":"HOOK_SECRET"}`, UpdatedBy: "alice", UpdatedAt: at}
	require.NoError(t, store.PutChannel(ctx, c, "created"))
	gotC, err := store.GetChannel(ctx, c.Name)
	require.NoError(t, err)
	require.Equal(t, c, gotC)
	channels, err := store.Channels(ctx)
	require.NoError(t, err)
	require.Contains(t, channels, c)
	require.NoError(t, store.DeleteChannel(ctx, c.Name, "bob"))
	_, err = store.GetChannel(ctx, c.Name)
	require.ErrorIs(t, err, centralstore.ErrNotFound)
}
