package centralstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// List is one row of notification_lists: who a notification to Name
// reaches, resolved again at every delivery attempt.
type List struct {
	Name string `json:"name"`
	// Type picks the delivery adapter: contract.NotificationTypeEmail,
	// …Teams or …Webhook.
	Type string `json:"type"`
	// Targets are email addresses (Email) or URLs (Teams, Webhook); a
	// target "env:NAME" is read from the central worker's environment at
	// delivery, so a URL that carries its own secret is never stored.
	Targets []string `json:"targets"`
	// Channel names the delivery channel: an smtp one for Email ("" is
	// central.smtp), a webhook one for Webhook (its secret signs the body).
	Channel string `json:"channel,omitempty"`
	// TypeData is a JSON object of the type's own fields (a Teams card's
	// style, a webhook's extra headers), checked when the list is written.
	TypeData    string    `json:"typeData"`
	Description string    `json:"description,omitempty"`
	UpdatedBy   string    `json:"updatedBy"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// Channel is one row of delivery_channels: an SMTP server or a webhook
// signing secret that lists name. Secrets are named by environment
// variable in Settings, never stored.
type Channel struct {
	Name string `json:"name"`
	// Type is ChannelSMTP or ChannelWebhook.
	Type string `json:"type"`
	// Settings is a JSON object of the type's fields.
	Settings    string    `json:"settings"`
	Description string    `json:"description,omitempty"`
	UpdatedBy   string    `json:"updatedBy"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// Delivery channel types.
const (
	ChannelSMTP    = "smtp"
	ChannelWebhook = "webhook"
)

// Audit kinds and events of a change to a list or a channel. Their
// operation id is "list/NAME" or "channel/NAME".
const (
	AuditKindList                   = "List"
	AuditKindChannel                = "Channel"
	AuditChanged     AuditEventType = "Changed"
	AuditRemoved     AuditEventType = "Removed"
)

// MaxDefinitionNameChars bounds a list or channel name, so that its audit
// operation id ("channel/" and the name) fits audit_log.operation_id.
const MaxDefinitionNameChars = 56

// ListOperationID and ChannelOperationID are the audit_log operation ids of
// a list's and a channel's changes.
func ListOperationID(name string) string    { return "list/" + name }
func ChannelOperationID(name string) string { return "channel/" + name }

const listColumns = `name, type, targets, channel, type_data, description, updated_by, updated_at`

// GetList reads one list; ErrNotFound if there is none.
func (s *Store) GetList(ctx context.Context, name string) (List, error) {
	row, err := s.queryRowKept(ctx, s.bind(`SELECT `+listColumns+` FROM notification_lists WHERE name = ?`), name)
	if err != nil {
		return List{}, fmt.Errorf("read notification list %q: %w", name, err)
	}
	l, err := scanList(row)
	if errors.Is(err, sql.ErrNoRows) {
		return List{}, fmt.Errorf("notification list %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return List{}, fmt.Errorf("read notification list %q: %w", name, err)
	}
	return l, nil
}

// Lists reads every list, by name.
func (s *Store) Lists(ctx context.Context) ([]List, error) {
	rows, err := s.reads.QueryContext(ctx, `SELECT `+listColumns+` FROM notification_lists ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read notification lists: %w", err)
	}
	defer rows.Close()
	var lists []List
	for rows.Next() {
		l, err := scanList(rows)
		if err != nil {
			return nil, fmt.Errorf("read notification lists: %w", err)
		}
		lists = append(lists, l)
	}
	return lists, rows.Err()
}

// PutList creates or replaces list l (by name) and audits the change with
// who made it (l.UpdatedBy) and what it was (detail). l.UpdatedAt is the
// time now when zero.
func (s *Store) PutList(ctx context.Context, l List, detail string) error {
	targets, err := json.Marshal(l.Targets)
	if err != nil {
		return fmt.Errorf("encode targets: %w", err)
	}
	l.UpdatedAt = nowIfZero(l.UpdatedAt)
	event := definitionEvent(AuditKindList, ListOperationID(l.Name), AuditChanged, l.UpdatedBy, detail, l.UpdatedAt)
	err = s.upsert(ctx, event,
		`UPDATE notification_lists SET type = ?, targets = ?, channel = ?, type_data = ?, description = ?, updated_by = ?, updated_at = ?
		WHERE name = ?`,
		`INSERT INTO notification_lists (`+listColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		[]any{l.Type, string(targets), l.Channel, l.TypeData, l.Description, l.UpdatedBy, l.UpdatedAt.UTC(), l.Name},
		[]any{l.Name, l.Type, string(targets), l.Channel, l.TypeData, l.Description, l.UpdatedBy, l.UpdatedAt.UTC()})
	if err != nil {
		return fmt.Errorf("write notification list %q: %w", l.Name, err)
	}
	return nil
}

// DeleteList removes a list, audited with who; ErrNotFound if there is none.
func (s *Store) DeleteList(ctx context.Context, name, by string) error {
	event := definitionEvent(AuditKindList, ListOperationID(name), AuditRemoved, by, "", time.Now())
	if err := s.deleteDefinition(ctx, "notification_lists", name, event); err != nil {
		return fmt.Errorf("remove notification list %q: %w", name, err)
	}
	return nil
}

const channelColumns = `name, type, settings, description, updated_by, updated_at`

// GetChannel reads one delivery channel; ErrNotFound if there is none.
func (s *Store) GetChannel(ctx context.Context, name string) (Channel, error) {
	row := s.reads.QueryRowContext(ctx, s.bind(`SELECT `+channelColumns+` FROM delivery_channels WHERE name = ?`), name)
	c, err := scanChannel(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Channel{}, fmt.Errorf("delivery channel %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Channel{}, fmt.Errorf("read delivery channel %q: %w", name, err)
	}
	return c, nil
}

// Channels reads every delivery channel, by name.
func (s *Store) Channels(ctx context.Context) ([]Channel, error) {
	rows, err := s.reads.QueryContext(ctx, `SELECT `+channelColumns+` FROM delivery_channels ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read delivery channels: %w", err)
	}
	defer rows.Close()
	var channels []Channel
	for rows.Next() {
		c, err := scanChannel(rows)
		if err != nil {
			return nil, fmt.Errorf("read delivery channels: %w", err)
		}
		channels = append(channels, c)
	}
	return channels, rows.Err()
}

// PutChannel creates or replaces channel c (by name), audited like PutList.
func (s *Store) PutChannel(ctx context.Context, c Channel, detail string) error {
	c.UpdatedAt = nowIfZero(c.UpdatedAt)
	event := definitionEvent(AuditKindChannel, ChannelOperationID(c.Name), AuditChanged, c.UpdatedBy, detail, c.UpdatedAt)
	err := s.upsert(ctx, event,
		`UPDATE delivery_channels SET type = ?, settings = ?, description = ?, updated_by = ?, updated_at = ? WHERE name = ?`,
		`INSERT INTO delivery_channels (`+channelColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		[]any{c.Type, c.Settings, c.Description, c.UpdatedBy, c.UpdatedAt.UTC(), c.Name},
		[]any{c.Name, c.Type, c.Settings, c.Description, c.UpdatedBy, c.UpdatedAt.UTC()})
	if err != nil {
		return fmt.Errorf("write delivery channel %q: %w", c.Name, err)
	}
	return nil
}

// DeleteChannel removes a channel, audited with who; ErrNotFound if there
// is none.
func (s *Store) DeleteChannel(ctx context.Context, name, by string) error {
	event := definitionEvent(AuditKindChannel, ChannelOperationID(name), AuditRemoved, by, "", time.Now())
	if err := s.deleteDefinition(ctx, "delivery_channels", name, event); err != nil {
		return fmt.Errorf("remove delivery channel %q: %w", name, err)
	}
	return nil
}

// upsert runs update, or insert when update changed no row, and stores
// event, in one transaction. Both drivers run the same statements.
func (s *Store) upsert(ctx context.Context, event AuditEvent, update, insert string, updateArgs, insertArgs []any) error {
	return s.inTxWithEvents(ctx, func(tx *sql.Tx) ([]AuditEvent, error) {
		res, err := tx.ExecContext(ctx, s.bind(update), updateArgs...)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, err
		} else if n == 0 {
			if _, err := tx.ExecContext(ctx, s.bind(insert), insertArgs...); err != nil {
				return nil, err
			}
		}
		return []AuditEvent{event}, nil
	})
}

// deleteDefinition deletes the row of table named name and stores event.
func (s *Store) deleteDefinition(ctx context.Context, table, name string, event AuditEvent) error {
	return s.inTxWithEvents(ctx, func(tx *sql.Tx) ([]AuditEvent, error) {
		res, err := tx.ExecContext(ctx, s.bind(`DELETE FROM `+table+` WHERE name = ?`), name)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return nil, errors.Join(err, ErrNotFound)
		}
		return []AuditEvent{event}, nil
	})
}

// definitionEvent is the audit event of a change to a list or channel:
// each change is its own event, so its id is random.
func definitionEvent(kind, operationID string, event AuditEventType, by, detail string, at time.Time) AuditEvent {
	return AuditEvent{
		EventID: uuid.NewString(), OperationID: operationID, Kind: kind,
		Event: event, Operator: by, Detail: detail, At: at.UTC(),
	}
}

func nowIfZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t.UTC()
}

func scanList(row interface{ Scan(...any) error }) (List, error) {
	var l List
	var targets string
	if err := row.Scan(&l.Name, &l.Type, &targets, &l.Channel, &l.TypeData, &l.Description, &l.UpdatedBy, &l.UpdatedAt); err != nil {
		return List{}, err
	}
	l.UpdatedAt = l.UpdatedAt.UTC()
	if err := json.Unmarshal([]byte(targets), &l.Targets); err != nil {
		return List{}, fmt.Errorf("decode targets of list %q: %w", l.Name, err)
	}
	return l, nil
}

func scanChannel(row interface{ Scan(...any) error }) (Channel, error) {
	var c Channel
	if err := row.Scan(&c.Name, &c.Type, &c.Settings, &c.Description, &c.UpdatedBy, &c.UpdatedAt); err != nil {
		return Channel{}, err
	}
	c.UpdatedAt = c.UpdatedAt.UTC()
	return c, nil
}
