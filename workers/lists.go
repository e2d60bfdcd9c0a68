package workers

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/notification"
)

// SeededBy is who a list created from central.lists was written by.
const SeededBy = "central.lists (config file)"

// SeedLists creates each list of central.lists that the central store does
// not have yet, as an Email list. A list already in the store is left as
// operators made it: the store is where lists live and change
// (`outpost lists`), and the file only seeds a new installation.
func SeedLists(ctx context.Context, store *centralstore.Store, lists map[string][]string) error {
	for name, targets := range lists {
		_, err := store.GetList(ctx, name)
		if err == nil {
			continue
		}
		if !errors.Is(err, centralstore.ErrNotFound) {
			return err
		}
		l, err := notification.CheckList(centralstore.List{
			Name: name, Type: contract.NotificationTypeEmail, Targets: targets, UpdatedBy: SeededBy,
		}, nil)
		if err != nil {
			return fmt.Errorf("central.lists: %w", err)
		}
		if err := store.PutList(ctx, l, "created from central.lists"); err != nil {
			return err
		}
	}
	return nil
}

// NewAdapters are the delivery adapters of a central worker: email through
// central.smtp (or a list's smtp channel), Teams and Webhook over HTTP.
// worker names the central worker in each email (notification.HeaderWorker);
// log receives the Webhook adapter's warnings (a channel's plain secret).
func NewAdapters(mail notification.MailerConfig, worker string, log *zap.Logger) notification.Adapters {
	return notification.Adapters{
		contract.NotificationTypeEmail:   notification.NewMailer(mail).WithWorker(worker),
		contract.NotificationTypeTeams:   notification.NewTeams(nil, nil),
		contract.NotificationTypeWebhook: notification.NewWebhook(nil, nil, log),
	}
}
