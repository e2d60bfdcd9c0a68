package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/airgap"
	"github.com/outpost-dev/outpost/internal/airgapsync"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/site/targetcalls"
)

// A site with no link to central accepts 1,000 notifications and 100
// cached calls; a signed bundle carries them to central, which delivers
// each notification once (counted at the SMTP server) and mirrors every
// call; the signed receipt empties the site's buffer, so a forwarder has
// nothing left to send; the same bundle imported again delivers nothing
// and reports 1,100 duplicates.
func TestAirgapRoundTrip(t *testing.T) {
	const notifications, calls = 1000, 100
	s := newStack(t, nil, withoutSite())
	ctx := context.Background()

	// The site: the SDK on the site file, no Temporal client at all.
	c, err := site.Open(ctx, s.cfg.Site.Store, site.Options{SiteID: "ship-7", Node: "node-a",
		ExternalSystems: map[string]config.ExternalSystem{"erp": testSystem(s.demo.URL() + "/api")}, Calls: targetcalls.New})
	require.NoError(t, err)
	var ids []string
	for i := range notifications {
		id, err := c.Send(ctx, site.Notification{List: "ops", Subject: fmt.Sprintf("Tank %d low", i), IdempotencyKey: fmt.Sprintf("tank-%d", i)})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	var callIDs []string
	for i := range calls {
		res, err := c.Call(ctx, "erp", "createOrder", map[string]any{"order": i})
		require.NoError(t, err)
		require.Equal(t, contract.StatusDelivered, res.Status, "the site's own target answers while central is away")
		callIDs = append(callIDs, res.ID)
	}
	require.NoError(t, c.Close())

	keys := filepath.Join(s.dir, "keys")
	require.NoError(t, os.MkdirAll(filepath.Join(keys, "trusted-at-central"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(keys, "trusted-at-site"), 0o755))
	_, err = s.outpostConfig("", "", "airgap", "keygen", "--dir", keys, "ship-7")
	require.NoError(t, err)
	_, err = s.outpostConfig("", "", "airgap", "keygen", "--dir", keys, "central")
	require.NoError(t, err)
	require.NoError(t, os.Rename(filepath.Join(keys, "ship-7.pub"), filepath.Join(keys, "trusted-at-central", "ship-7.pub")))
	require.NoError(t, os.Rename(filepath.Join(keys, "central.pub"), filepath.Join(keys, "trusted-at-site", "central.pub")))

	siteConfig := filepath.Join(s.dir, "ship-7.yaml")
	require.NoError(t, os.WriteFile(siteConfig, []byte(fmt.Sprintf("site:\n  id: ship-7\n  node: node-a\n  store: %s\nlog:\n  level: warn\n", s.cfg.Site.Store)), 0o644))
	bundle := filepath.Join(s.dir, "usb", "ship-7.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(bundle), 0o755))
	out, err := s.outpostConfig(siteConfig, "", "airgap", "export", "-o", bundle, "--sign", filepath.Join(keys, "ship-7.key"))
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("%d entries (%d cached calls)", notifications+calls, calls))

	st := siteStatus(t, s.cfg.Site.Store, ids[0])
	require.Equal(t, contract.StatusExported, st.Status, "the site says where its notification went")

	var first airgapsync.ImportResult
	s.outpostJSON(&first, "", "airgap", "import", "--json", "--trusted-keys", filepath.Join(keys, "trusted-at-central"),
		"--sign", filepath.Join(keys, "central.key"), bundle)
	require.Equal(t, notifications+calls, first.Imported)
	require.Zero(t, first.Duplicates)

	testutil.WaitFor(t, 3*time.Minute, func() bool { return len(s.received()) == notifications },
		func() string {
			return fmt.Sprintf("%d of %d notifications delivered", len(s.received()), notifications)
		})
	for _, id := range ids {
		require.Equal(t, 1, s.received()[id], "notification %s delivered once", id)
	}
	store := s.centralStore()
	for _, id := range callIDs {
		row, err := store.GetSiteCall(ctx, id)
		require.NoError(t, err, "central mirrors call %s", id)
		require.Equal(t, contract.StatusDelivered, row.Status)
	}

	receipt := filepath.Join(s.dir, "usb", "ship-7.receipt.json")
	out, err = s.outpostConfig(siteConfig, "", "airgap", "ack", "--trusted-keys", filepath.Join(keys, "trusted-at-site"), receipt)
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("settled %d", notifications+calls))
	siteStore, err := sitestore.Open(ctx, s.cfg.Site.Store, sitestore.Options{})
	require.NoError(t, err)
	depth, err := siteStore.Depth(ctx)
	require.NoError(t, err)
	require.NoError(t, siteStore.Close())
	require.Zero(t, depth, "the receipt emptied the buffer: a returning link sends nothing")
	require.Equal(t, contract.StatusPending, siteStatus(t, s.cfg.Site.Store, ids[0]).Status, "the receipt's state, with central out of reach")

	var again airgapsync.ImportResult
	s.outpostJSON(&again, "", "airgap", "import", "--json", "--trusted-keys", filepath.Join(keys, "trusted-at-central"), bundle)
	require.Zero(t, again.Imported)
	require.Equal(t, notifications+calls, again.Duplicates)
	time.Sleep(2 * time.Second)
	require.Len(t, s.received(), notifications, "nothing was delivered twice")
}

// siteStatus is the site SDK's answer for a notification, with no link to central.
func siteStatus(t *testing.T, storePath, id string) contract.NotificationState {
	t.Helper()
	c, err := site.Open(context.Background(), storePath, site.Options{SiteID: "ship-7", Node: "node-a"})
	require.NoError(t, err)
	defer c.Close()
	st, err := c.Status(context.Background(), id)
	require.NoError(t, err)
	return st
}

// One idempotency key used on two nodes of a site: for the same
// notification the two bundles import as one delivery and a duplicate; for
// another subject the import is refused as a conflict and nothing of it is
// delivered.
func TestAirgapOneKeyOnTwoNodes(t *testing.T) {
	s := newStack(t, nil, withoutSite())
	ctx := context.Background()
	nodes := map[string]string{} // node -> its site config
	for _, node := range []string{"node-a", "node-b"} {
		store := filepath.Join(s.dir, node+".db")
		nodes[node] = filepath.Join(s.dir, node+".yaml")
		yaml := fmt.Sprintf("site:\n  id: ship-9\n  node: %s\n  store: %s\nlog:\n  level: warn\n", node, store)
		require.NoError(t, os.WriteFile(nodes[node], []byte(yaml), 0o644))
	}
	send := func(node, key, subject string) string {
		t.Helper()
		c, err := targetcalls.OpenConfig(ctx, nodes[node], site.Options{})
		require.NoError(t, err)
		defer c.Close()
		id, err := c.Send(ctx, site.Notification{List: "ops", Subject: subject, IdempotencyKey: key})
		require.NoError(t, err)
		return id
	}
	exportBoth := func(round string) []string {
		t.Helper()
		var bundles []string
		for _, node := range []string{"node-a", "node-b"} {
			path := filepath.Join(s.dir, "usb", round+"-"+node+".json")
			out, err := s.outpostConfig(nodes[node], "", "airgap", "export", "-o", path)
			require.NoError(t, err, out)
			bundles = append(bundles, path)
		}
		return bundles
	}
	importAll := func(bundles []string) (airgapsync.ImportResult, error) {
		t.Helper()
		out, err := s.outpost("", append([]string{"airgap", "import", "--json", "--allow-unsigned"}, bundles...)...)
		var res airgapsync.ImportResult
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		return res, err
	}

	id := send("node-a", "tank-7-low", "Tank 7 low")
	_, err := s.outpostConfig(nodes["node-a"], "", "airgap", "export", "-o", filepath.Join(s.dir, "usb", "x.json"))
	require.ErrorContains(t, err, "usb does not exist (is the stick mounted?", "a missing directory is named")
	require.NoError(t, os.MkdirAll(filepath.Join(s.dir, "usb"), 0o755))
	require.Equal(t, id, send("node-b", "tank-7-low", "Tank 7 low"), "one key, one id on every node")
	res, err := importAll(exportBoth("first"))
	require.NoError(t, err)
	require.Equal(t, 1, res.Imported)
	require.Equal(t, 1, res.Duplicates, "node-b's copy is the same request")
	testutil.WaitFor(t, time.Minute, func() bool { return s.received()[id] == 1 }, func() string { return "the notification is not delivered" })

	reused := send("node-a", "valve-3", "Valve 3 open")
	require.Equal(t, reused, send("node-b", "valve-3", "Valve 3 shut"))
	res, err = importAll(exportBoth("second"))
	require.ErrorIs(t, err, airgapsync.ErrNotImported)
	require.Zero(t, res.Imported)
	require.Len(t, res.Conflicts, 1)
	require.Equal(t, reused, res.Conflicts[0].JobID)
	require.Equal(t, airgap.ConflictPayloadMismatch, res.Conflicts[0].Type)
	time.Sleep(2 * time.Second)
	require.Zero(t, s.received()[reused], "nothing of a refused import is delivered")
	require.Equal(t, 1, s.received()[id], "and nothing twice")
}
