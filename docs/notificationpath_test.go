package docs

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// maxNotificationPathFiles is how many files a reader opens to follow a
// notification from the SDK's Notify to the SMTP send, as
// docs/ARCHITECTURE.md says.
const maxNotificationPathFiles = 6

// notificationPath is that path, one file a step, in order: each file
// holds the function of its step and the call (or name) that leads on to
// the next, so a step moved to another file fails the test rather than
// lengthening the path unseen.
var notificationPath = []struct {
	file  string
	holds []string // definitions this step's file must hold
	leads []string // calls or names in it that lead to the next step
}{
	{"site/client.go", []string{"func (c *Client) Notify(", "func (c *Client) Send("}, []string{"c.store.Enqueue("}},
	{"internal/sitestore/store.go", []string{"func (s *Store) Enqueue(", "func (s *Store) DueAfter("}, nil},
	{"internal/sitedaemon/forwarder.go", []string{"func (f *Forwarder) handOff(", "func (f *Forwarder) handOffNotification("},
		[]string{"s.f.store.DueAfter(", "contract.WorkflowNotificationStarted"}},
	{"notification/workflow.go", []string{"func (w Workflow) RunStarted("},
		[]string{"acts.RecordAndDeliverNotification", "acts.DeliverNotification"}},
	{"notification/activities.go", []string{"func (a *Activities) RecordAndDeliverNotification(",
		"func (a *Activities) DeliverNotification(", "func (a Adapters) For("}, []string{"adapter.Deliver("}},
	{"notification/email.go", []string{"func (m *Mailer) Deliver(", "func (m *Mailer) Send("}, []string{"client.SendWithSMTPClient("}},
}

// A notification's path from Notify to the SMTP send is at most
// maxNotificationPathFiles files, each visited once.
func TestNotificationPathIsSixFiles(t *testing.T) {
	t.Parallel()
	var files []string
	for _, step := range notificationPath {
		if slices.Contains(files, step.file) {
			t.Errorf("%s is on the path twice: following a notification goes back to it", step.file)
		}
		files = append(files, step.file)
		text, err := os.ReadFile("../" + step.file)
		if err != nil {
			t.Errorf("a step of the notification path: %v", err)
			continue
		}
		for _, want := range slices.Concat(step.holds, step.leads) {
			if !strings.Contains(string(text), want) {
				t.Errorf("%s does not hold %q: the path has moved, update it here and in ARCHITECTURE.md", step.file, want)
			}
		}
	}
	if len(files) > maxNotificationPathFiles {
		t.Errorf("the notification path is %d files, more than %d", len(files), maxNotificationPathFiles)
	}
	// The adapters take their own Message, not the central store's row.
	for _, adapter := range []string{"notification/email.go", "notification/teams.go", "notification/webhook.go", "notification/http.go"} {
		text, err := os.ReadFile("../" + adapter)
		if err != nil {
			t.Errorf("an adapter: %v", err)
			continue
		}
		if strings.Contains(string(text), "centralstore.") {
			t.Errorf("%s uses the central store's types: an adapter delivers a notification.Message", adapter)
		}
	}
	// The workers register the workflow the forwarder starts by name.
	central, err := os.ReadFile("../workers/central.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(central), "RunStarted, workflow.RegisterOptions{Name: contract.WorkflowNotificationStarted}") {
		t.Error("workers/central.go does not register notification.Workflow.RunStarted as contract.WorkflowNotificationStarted")
	}
}
