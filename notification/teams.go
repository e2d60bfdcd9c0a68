package notification

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/outpost-dev/outpost/internal/targets"
)

// Teams posts an Adaptive Card to Microsoft Teams webhook URLs (a Teams
// Workflows "post to a channel when a webhook request is received" flow, or
// a classic Incoming Webhook).
type Teams struct {
	poster poster
}

// NewTeams returns the Teams adapter; client and now may be nil.
func NewTeams(client *http.Client, now func() time.Time) Teams {
	return Teams{poster: newPoster(client, now)}
}

// Deliver posts the notification's card to every target.
func (a Teams) Deliver(ctx context.Context, m Message) error {
	var data TeamsData
	if err := json.Unmarshal([]byte(orEmpty(m.ListData)), &data); err != nil {
		return &targets.Failure{Permanent: true, Err: fmt.Errorf("list %q: type_data: %w", m.List, err)}
	}
	body, err := json.Marshal(TeamsMessage(m, data))
	if err != nil {
		return &targets.Failure{Permanent: true, Err: err}
	}
	header := http.Header{HeaderNotificationID: {m.ID}}
	return a.poster.postAll(ctx, m.Targets, body, header)
}

// TeamsMessage is the message a Teams webhook takes: one Adaptive Card
// attachment with the subject as its title, the body, where it came from,
// and a button to the notification in the Web UI.
func TeamsMessage(m Message, data TeamsData) map[string]any {
	style := data.Style
	if style == "" {
		style = "attention"
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"type":    "AdaptiveCard",
		"version": "1.4",
		"body": []any{
			map[string]any{"type": "Container", "style": style, "bleed": true, "items": []any{
				map[string]any{"type": "TextBlock", "text": m.Subject, "weight": "Bolder", "size": "Medium", "wrap": true},
			}},
			map[string]any{"type": "TextBlock", "text": m.Body, "wrap": true},
			map[string]any{"type": "FactSet", "facts": []any{
				map[string]any{"title": "Site", "value": m.SourceSite},
				map[string]any{"title": "Script", "value": m.SourceScript},
				map[string]any{"title": "List", "value": m.List},
				map[string]any{"title": "Notification", "value": m.ID},
			}},
		},
	}
	if m.Link != "" {
		card["actions"] = []any{map[string]any{"type": "Action.OpenUrl", "title": "Open in Outpost", "url": m.Link}}
	}
	return map[string]any{
		"type": "message",
		"attachments": []any{map[string]any{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"content":     card,
		}},
	}
}

func orEmpty(data string) string {
	if data == "" {
		return "{}"
	}
	return data
}
