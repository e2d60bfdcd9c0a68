package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/notification"
)

var listsApplyCommand = command{
	name:    "lists apply",
	summary: "make the central store's lists and channels match a YAML file (config as code)",
	usage:   "[--config FILE] [--dry-run] [--operator WHO] DEFINITIONS.yaml",
	help: `Reads lists and channels from a YAML file kept in version control, prints
what would change (created, changed fields, targets added and removed), and
writes the changes unless --dry-run. Entries that match the store are left
alone, so applying the same file twice changes nothing the second time.
Lists and channels in the store but not in the file are named and kept
(remove them with 'outpost lists rm'). Every entry is checked before
anything is written: one bad entry writes nothing.

The file:
  channels:
    ops-hooks: {type: webhook, settings: {secret_env: OPS_HOOK_SECRET}}
  lists:
    ops:       {type: Email, targets: [ops@plant.example, oncall@plant.example]}
    ops-teams: {type: Teams, targets: ["env:OPS_TEAMS_URL"], type_data: {style: warning}}
    ops-hook:  {type: Webhook, targets: ["https://hooks.plant.example/outpost"], channel: ops-hooks}
An Outpost config file works too: its central.lists become Email lists.

Example:
  outpost lists apply --config /etc/outpost/outpost.yaml --dry-run lists.yaml
  outpost lists apply --config /etc/outpost/outpost.yaml --operator ci lists.yaml`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		dryRun := fs.Bool("dry-run", false, "print what would change and write nothing")
		return withDefinitions(ctx, env, fs, args, 1, func(d *definitions) error {
			file, err := readDefinitions(d.args[0])
			if err != nil {
				return err
			}
			plan, err := d.plan(ctx, file)
			if err != nil {
				return err
			}
			plan.print(env)
			if *dryRun || len(plan.writes) == 0 {
				fmt.Fprintf(env.Stdout, "%d change(s); nothing written%s.\n", len(plan.writes), map[bool]string{true: " (--dry-run)"}[*dryRun])
				return nil
			}
			for _, w := range plan.writes {
				if err := w(ctx); err != nil {
					return err
				}
			}
			fmt.Fprintf(env.Stdout, "%d change(s) written.\n", len(plan.writes))
			return nil
		})
	},
}

// definitionsFile is what lists apply reads.
type definitionsFile struct {
	Channels map[string]fileChannel
	Lists    map[string]fileList
}

type fileChannel struct {
	Type        string         `yaml:"type"`
	Settings    map[string]any `yaml:"settings"`
	Description string         `yaml:"description"`
}

type fileList struct {
	Type        string         `yaml:"type"`
	Targets     []string       `yaml:"targets"`
	Channel     string         `yaml:"channel"`
	TypeData    map[string]any `yaml:"type_data"`
	Description string         `yaml:"description"`
}

// readDefinitions reads a definitions file, strictly (a misspelt field is
// an error), or the central.lists of an Outpost config file.
func readDefinitions(path string) (definitionsFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return definitionsFile{}, err
	}
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return definitionsFile{}, fmt.Errorf("%s: %w", path, err)
	}
	if _, isConfig := top["central"]; isConfig {
		return centralLists(path, data)
	}
	var file struct {
		Channels map[string]fileChannel `yaml:"channels"`
		Lists    map[string]fileList    `yaml:"lists"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		return definitionsFile{}, fmt.Errorf("%s: %w (want top-level channels: and lists:)", path, err)
	}
	return definitionsFile{Channels: file.Channels, Lists: file.Lists}, nil
}

func centralLists(path string, data []byte) (definitionsFile, error) {
	var cfg struct {
		Central struct {
			Lists map[string][]string `yaml:"lists"`
		} `yaml:"central"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return definitionsFile{}, fmt.Errorf("%s: central.lists: %w", path, err)
	}
	file := definitionsFile{Lists: map[string]fileList{}}
	for name, targets := range cfg.Central.Lists {
		file.Lists[name] = fileList{Type: contract.NotificationTypeEmail, Targets: targets}
	}
	return file, nil
}

// applyPlan is what lists apply prints and writes.
type applyPlan struct {
	lines  []string
	writes []func(context.Context) error
}

func (p *applyPlan) print(env Env) {
	for _, l := range p.lines {
		fmt.Fprintln(env.Stdout, l)
	}
}

// plan checks every entry of file against the store and says what
// applying it changes.
func (d *definitions) plan(ctx context.Context, file definitionsFile) (*applyPlan, error) {
	p := &applyPlan{}
	channels, err := notification.ChannelsByName(ctx, d.store)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(file.Channels)) {
		if err := d.planChannel(ctx, p, channels, name, file.Channels[name]); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(file.Lists)) {
		if err := d.planList(ctx, p, channels, name, file.Lists[name]); err != nil {
			return nil, err
		}
	}
	return p, d.planUnnamed(ctx, p, file)
}

func (d *definitions) planChannel(ctx context.Context, p *applyPlan, channels map[string]centralstore.Channel, name string, fc fileChannel) error {
	settings, err := jsonObject(fc.Settings)
	if err != nil {
		return fmt.Errorf("channel %q: settings: %w", name, err)
	}
	old, existed := channels[name]
	change, err := notification.PlanChannel(old, centralstore.Channel{Name: name, Type: fc.Type, Settings: settings, Description: fc.Description}, existed)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if note := notification.WebhookSecretNote(change.Channel); note != "" {
		p.lines = append(p.lines, note)
	}
	channels[name] = change.Channel // lists later in the file may use it
	if change.Diff == "" {
		p.lines = append(p.lines, "channel "+name+": unchanged")
		return nil
	}
	p.lines = append(p.lines, "channel "+name+": "+change.Diff)
	p.writes = append(p.writes, func(ctx context.Context) error { return change.Write(ctx, d.store, d.operator) })
	return nil
}

func (d *definitions) planList(ctx context.Context, p *applyPlan, channels map[string]centralstore.Channel, name string, fl fileList) error {
	typeData, err := jsonObject(fl.TypeData)
	if err != nil {
		return fmt.Errorf("list %q: type_data: %w", name, err)
	}
	old, err := d.store.GetList(ctx, name)
	existed := err == nil
	if err != nil && !errors.Is(err, centralstore.ErrNotFound) {
		return err
	}
	change, err := notification.PlanList(old, centralstore.List{Name: name, Type: fl.Type, Targets: fl.Targets, Channel: fl.Channel,
		TypeData: typeData, Description: fl.Description}, existed, channels)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if change.Diff == "" {
		p.lines = append(p.lines, "list "+name+": unchanged")
		return nil
	}
	p.lines = append(p.lines, "list "+name+": "+change.Diff)
	p.writes = append(p.writes, func(ctx context.Context) error { return change.Write(ctx, d.store, d.operator) })
	return nil
}

// planUnnamed names what the store has and the file does not.
func (d *definitions) planUnnamed(ctx context.Context, p *applyPlan, file definitionsFile) error {
	lists, err := d.store.Lists(ctx)
	if err != nil {
		return err
	}
	for _, l := range lists {
		if _, ok := file.Lists[l.Name]; !ok {
			p.lines = append(p.lines, "list "+l.Name+": not in the file, kept (outpost lists rm "+l.Name+" removes it)")
		}
	}
	channels, err := d.store.Channels(ctx)
	if err != nil {
		return err
	}
	for _, c := range channels {
		if _, ok := file.Channels[c.Name]; !ok {
			p.lines = append(p.lines, "channel "+c.Name+": not in the file, kept (outpost channels rm "+c.Name+" removes it)")
		}
	}
	return nil
}

// jsonObject encodes a YAML mapping as a JSON object ("{}" when empty).
func jsonObject(m map[string]any) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}
