package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/notification"
)

var channelsLsCommand = command{
	name:    "channels ls",
	summary: "the delivery channels lists send through (SMTP servers, webhook secrets)",
	usage:   "[--config FILE] [--json]",
	help: `Lists the delivery channels in the central store: smtp channels (a mail
server an Email list sends through instead of central.smtp) and webhook
channels (the secret that signs a Webhook list's POSTs). Secrets are named
by environment variable, never stored.

Example:
  outpost channels ls --config /etc/outpost/outpost.yaml`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		asJSON := fs.Bool("json", false, "print the channels as JSON")
		return withDefinitions(ctx, env, fs, args, 0, func(d *definitions) error {
			channels, err := d.store.Channels(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(env.Stdout, nonNil(channels))
			}
			printChannels(env.Stdout, channels)
			return nil
		})
	},
}

var channelsSetCommand = command{
	name:    "channels set",
	summary: "create or change a delivery channel",
	usage:   "[--config FILE] [--type smtp|webhook] [--settings JSON] [--description D] [--operator WHO] NAME",
	help: `Creates the channel NAME, or changes the fields given. Settings by type:
  smtp     {"host":"relay.plant.example","port":587,"from":"outpost@plant.example",
            "username":"outpost","password_env":"RELAY_PASSWORD","tls":"starttls"}
           (tls: none, opportunistic, starttls or tls; timeouts are central.smtp's)
  webhook  {"secret_env":"OPS_HOOK_SECRET"}: the variable, set on every central
           worker, holding the Standard Webhooks secret that signs every POST
           (receivers verify with the same); make one with
           echo "whsec_$(openssl rand -base64 32)". Where this command runs with
           the variable set, a whsec_ value that is not valid is refused.
The next delivery attempt of every list using the channel uses the change.

Example:
  outpost channels set --type webhook --settings '{"secret_env":"OPS_HOOK_SECRET"}' ops-hooks`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		typ := fs.String("type", "", "smtp or webhook (required for a new channel)")
		settings := fs.String("settings", "", "the type's settings as a JSON object")
		description := fs.String("description", "", "what the channel is")
		return withDefinitions(ctx, env, fs, args, 1, func(d *definitions) error {
			c, err := d.store.GetChannel(ctx, d.args[0])
			existed := err == nil
			if err != nil && !errors.Is(err, centralstore.ErrNotFound) {
				return err
			}
			changed := c
			changed.Name = d.args[0]
			setIfGiven(&changed.Type, *typ)
			setIfGiven(&changed.Settings, *settings)
			setIfGiven(&changed.Description, *description)
			return d.putChannel(ctx, c, changed, existed)
		})
	},
}

var channelsRmCommand = command{
	name:    "channels rm",
	summary: "remove a delivery channel no list uses",
	usage:   "[--config FILE] [--operator WHO] NAME",
	help: `Removes the channel. A channel a list still names is refused: change the
list first (outpost lists set --channel - LIST for none).

Example:
  outpost channels rm --operator ana old-relay`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		return withDefinitions(ctx, env, fs, args, 1, func(d *definitions) error {
			lists, err := d.store.Lists(ctx)
			if err != nil {
				return err
			}
			for _, l := range lists {
				if l.Channel == d.args[0] {
					return fmt.Errorf("channel %q is used by list %q: change the list first", d.args[0], l.Name)
				}
			}
			if err := d.store.DeleteChannel(ctx, d.args[0], d.operator); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "Removed channel %s.\n", d.args[0])
			return nil
		})
	},
}

// putChannel writes changed (see notification.SaveChannel) and prints what it did.
func (d *definitions) putChannel(ctx context.Context, old, changed centralstore.Channel, existed bool) error {
	diff, err := notification.SaveChannel(ctx, d.store, old, changed, existed, d.operator)
	if err := d.report(err, "Channel", changed.Name, diff); err != nil {
		return err
	}
	if note := notification.WebhookSecretNote(changed); note != "" {
		fmt.Fprintln(d.env.Stdout, note)
	}
	return nil
}

func printChannels(w io.Writer, channels []centralstore.Channel) {
	if len(channels) == 0 {
		fmt.Fprintln(w, "No delivery channels: Email lists send through central.smtp.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tSETTINGS\tUPDATED\tBY")
	for _, c := range channels {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Type, c.Settings, formatTime(c.UpdatedAt), orDash(c.UpdatedBy))
	}
	_ = tw.Flush()
}
