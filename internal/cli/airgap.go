package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/airgap"
	"github.com/outpost-dev/outpost/internal/airgapsync"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/hlc"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// The air-gap commands carry a disconnected site's work to central on
// files: export on the site, import at central, ack back on the site.

var airgapKeygenCommand = command{
	name:    "airgap keygen",
	summary: "make an ed25519 key pair to sign bundles or receipts",
	usage:   "[--dir DIR] NAME",
	help: `Writes NAME.key (the private key, mode 0600: keep it on the machine that
signs) and NAME.pub (give it to whoever verifies: put it in their
--trusted-keys directory). An existing file is never overwritten.

Example:
  outpost airgap keygen --dir /etc/outpost/keys ship-7`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		dir := fs.String("dir", ".", "the `DIR`ectory to write the key files in")
		rest, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if err := checkArgCount(fs.Name(), rest, 1); err != nil {
			return err
		}
		priv, pub, err := airgap.GenerateKey(*dir, rest[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "private key: %s (keep it secret)\npublic key:  %s (copy it to the verifier's --trusted-keys directory)\n", priv, pub)
		return nil
	},
}

var airgapExportCommand = command{
	name:    "airgap export",
	summary: "write this site's unacknowledged operations to a bundle file",
	usage:   "[--config FILE] -o FILE [--site ID] [--node NODE] [--since HLC] [--sign KEYFILE] [--json] [--verbose]",
	help: `Writes the node's job log, from the first operation central has not
acknowledged, to a bundle: every entry with its HLC time and hash-chain
link, the cached calls' current states, and a manifest digest; --sign adds
a DSSE signature central checks against its trusted keys. The exported
operations show Exported in the site's status until a receipt (airgap
ack) or the returning link settles them. Exporting again is safe: central
takes each operation once.

Example:
  outpost airgap export --config /etc/outpost/outpost.yaml --sign /etc/outpost/keys/ship-7.key -o /media/usb/ship-7.json`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		out := fs.String("o", "", "the bundle `FILE` to write (required)")
		siteID := fs.String("site", "", "the site id (the bundle's tenant); default site.id")
		node := fs.String("node", "", "the node whose log to export; default site.node")
		since := fs.String("since", "", "export the entries after this `HLC` (as a bundle's tHlc); default: all not yet acknowledged")
		signWith := fs.String("sign", "", "sign the bundle with this private `KEYFILE` (airgap keygen)")
		asJSON := fs.Bool("json", false, "print the result as JSON")
		verbose := fs.Bool("verbose", false, "list every exported entry")
		op, err := loadOperator(fs, args)
		if err != nil {
			return err
		}
		defer op.close()
		if err := checkArgCount(fs.Name(), op.args, 0); err != nil {
			return err
		}
		if *out == "" {
			return fmt.Errorf("%w: -o FILE is required: where to write the bundle", ErrUsage)
		}
		opts := airgapsync.ExportOptions{Site: or(*siteID, op.cfg.Site.ID), Node: or(*node, op.cfg.Site.Node), Now: time.Now().UTC(), Path: *out}
		if *since != "" {
			ts, err := hlc.Parse(*since)
			if err != nil {
				return fmt.Errorf("%w: --since: %w", ErrUsage, err)
			}
			opts.Since = &ts
		}
		if *signWith != "" {
			key, err := airgap.LoadPrivateKey(*signWith)
			if err != nil {
				return err
			}
			opts.Key = &key
		}
		b, err := exportBundle(ctx, op.cfg.Site.Store, opts)
		if err != nil {
			return err
		}
		return printExport(env.Stdout, *out, b, *asJSON, *verbose)
	},
}

// exportBundle exports from the site file at storePath.
func exportBundle(ctx context.Context, storePath string, opts airgapsync.ExportOptions) (airgap.Bundle, error) {
	store, err := sitestore.Open(ctx, storePath, sitestore.Options{})
	if err != nil {
		return airgap.Bundle{}, err
	}
	defer store.Close()
	return airgapsync.Export(ctx, store, opts)
}

func printExport(w io.Writer, path string, b airgap.Bundle, asJSON, verbose bool) error {
	n := 0
	for _, l := range b.JobLogs {
		n += len(l.Entries)
	}
	if asJSON {
		return writeJSON(w, map[string]any{"path": path, "bundleId": b.BundleID, "site": b.TenantID,
			"node": b.CreatedByNodeID, "entries": n, "calls": len(b.Calls), "signedBy": b.SignedBy, "manifestDigest": b.ManifestDigest})
	}
	fmt.Fprintf(w, "wrote %s: bundle %s, site %s, node %s, %d entries (%d cached calls), %s\n",
		path, b.BundleID, b.TenantID, b.CreatedByNodeID, n, len(b.Calls), signedText(b.SignedBy))
	if verbose {
		for _, l := range b.JobLogs {
			for _, e := range l.Entries {
				fmt.Fprintf(w, "  %s  %-13s %s\n", e.THLC, e.Kind, e.JobID)
			}
		}
	}
	return nil
}

func signedText(by string) string {
	if by == "" {
		return "unsigned"
	}
	return "signed by " + by
}

var airgapImportCommand = command{
	name:    "airgap import",
	summary: "verify bundles at central, hand their operations over, write a receipt",
	usage:   "[--config FILE] [--trusted-keys DIR] [--allow-unsigned] [--verify-only] [--force] [--sign KEYFILE] [--receipt FILE] [--json] [--verbose] BUNDLE...",
	help: `Verifies every bundle (manifest digest, each entry's payload hash and
link, the chain from its checkpoint to its head, the signature against the
keys in --trusted-keys), merges them in HLC order, and hands each
notification to its workflow and each cached call's state to site_calls,
under the ids the site gave them: an operation that also arrived online,
or a bundle imported twice, is still one workflow and one email. Any
failed check imports nothing unless --force, which imports the logs that
verify and lists what it skipped and why. Two entries with one id and
different payloads are a conflict: nothing is imported.

It then writes a receipt (default BUNDLE.receipt.json next to the first
bundle; signed with --sign) to carry back to the site for airgap ack.

Example:
  outpost airgap import --config /etc/outpost/outpost.yaml --trusted-keys /etc/outpost/trusted --sign /etc/outpost/keys/central.key /media/usb/ship-7.json`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		f := importFlags{
			trusted:       fs.String("trusted-keys", "", "verify signatures against the *.pub keys in `DIR`"),
			allowUnsigned: fs.Bool("allow-unsigned", false, "accept bundles without a signature"),
			verifyOnly:    fs.Bool("verify-only", false, "verify and merge only; hand nothing to central"),
			force:         fs.Bool("force", false, "import the logs that verify, skip and report the rest"),
			signWith:      fs.String("sign", "", "sign the receipt with this private `KEYFILE`"),
			receipt:       fs.String("receipt", "", "write the receipt to `FILE` (default: BUNDLE.receipt.json)"),
			asJSON:        fs.Bool("json", false, "print the result as JSON"),
			verbose:       fs.Bool("verbose", false, "list every bundle's problems and skipped logs in full"),
			by:            fs.String("operator", defaultOperator(), "who imports, for the record; defaults to $USER (or the account's name)"),
		}
		op, err := loadOperator(fs, args)
		if err != nil {
			return err
		}
		defer op.close()
		if err := checkArgCount(fs.Name(), op.args, -1); err != nil {
			return err
		}
		return runImport(ctx, env, fs, op, f)
	},
}

type importFlags struct {
	trusted, signWith, receipt, by   *string
	allowUnsigned, verifyOnly, force *bool
	asJSON, verbose                  *bool
}

func runImport(ctx context.Context, env Env, fs *flag.FlagSet, op *operatorRun, f importFlags) error {
	verify, err := verifyOptions(*f.trusted, *f.allowUnsigned)
	if err != nil {
		return err
	}
	var key *airgap.PrivateKey
	if *f.signWith != "" {
		k, err := airgap.LoadPrivateKey(*f.signWith)
		if err != nil {
			return err
		}
		key = &k
	}
	bundles, err := airgapsync.ReadBundles(op.args)
	if err != nil {
		return err
	}
	store, _, err := openCentralToRead(ctx, op.cfg, fs)
	if err != nil {
		return err
	}
	defer store.Close()
	// Summaries follow site.workflow_summary of the file given, as the
	// site's own forwarder would have written them.
	im := &airgapsync.Importer{Store: store, HideSubject: op.cfg.Site.WorkflowSummary == config.SummaryListOnly,
		Region: contract.Region{Name: op.cfg.Central.Region, OwnQueue: op.cfg.Central.RegionQueue}}
	if !*f.verifyOnly { // verifying hands nothing to Temporal: it need not be up
		tc, err := fromconfig.DialTemporal(op.cfg.Temporal, op.log, nil, nil)
		if err != nil {
			return err
		}
		defer tc.Close()
		im.Temporal = tc
	}
	res, err := im.Import(ctx, bundles, airgapsync.ImportOptions{
		Verify: verify, VerifyOnly: *f.verifyOnly, Force: *f.force, By: *f.by, Now: time.Now().UTC(),
	})
	receiptPath := ""
	if err == nil && res.Receipt != nil {
		receiptPath = or(*f.receipt, strings.TrimSuffix(op.args[0], ".json")+".receipt.json")
		err = writeReceipt(receiptPath, res.Receipt, key)
	}
	printImport(env.Stdout, res, receiptPath, *f.asJSON, *f.verbose)
	return err
}

func writeReceipt(path string, r *airgap.Receipt, key *airgap.PrivateKey) error {
	if key != nil {
		if err := r.Sign(*key); err != nil {
			return err
		}
	}
	_, err := airgap.WriteFile(path, r)
	return err
}

// verifyOptions reads the trusted keys.
func verifyOptions(trustedDir string, allowUnsigned bool) (airgap.VerifyOptions, error) {
	opts := airgap.VerifyOptions{AllowUnsigned: allowUnsigned}
	if trustedDir == "" {
		return opts, nil
	}
	keys, err := airgap.LoadTrustedKeys(trustedDir)
	opts.TrustedKeys = keys
	return opts, err
}

func printImport(w io.Writer, res airgapsync.ImportResult, receiptPath string, asJSON, verbose bool) {
	if asJSON {
		_ = writeJSON(w, struct {
			airgapsync.ImportResult
			Receipt string `json:"receipt,omitempty"`
		}{res, receiptPath})
		return
	}
	for _, b := range res.Bundles {
		fmt.Fprintf(w, "%s: bundle %s, site %s, nodes %s, %d entries\n", b.Path, b.BundleID, b.Site, strings.Join(b.Nodes, ","), b.Entries)
		printImportedBefore(w, b)
		printLines(w, "problem", b.Problems, verbose)
		printLines(w, "skipped", b.Skipped, true)
	}
	for _, c := range res.Conflicts {
		fmt.Fprintf(w, "conflict: job %s has two payloads (node %s at %s, node %s at %s): nothing imported\n",
			c.JobID, c.First.NodeID, c.First.THLC, c.Second.NodeID, c.Second.THLC)
	}
	fmt.Fprintf(w, "imported %d, duplicates %d, skipped %d\n", res.Imported, res.Duplicates, res.SkippedEntries)
	if receiptPath != "" {
		fmt.Fprintf(w, "receipt: %s (carry it to the site: outpost airgap ack %s)\n", receiptPath, filepath.Base(receiptPath))
	}
}

// printImportedBefore says when central imported b before and who did:
// nothing to do when this copy verifies.
func printImportedBefore(w io.Writer, b airgapsync.BundleResult) {
	if b.ImportedBefore == nil {
		return
	}
	by := or(b.ImportedBefore.ImportedBy, "an operator not recorded")
	fmt.Fprintf(w, "  already imported %s by %s", b.ImportedBefore.ImportedAt.Format(time.RFC3339), by)
	if len(b.Problems) > 0 {
		fmt.Fprintln(w, ", but this copy does not verify:")
		return
	}
	fmt.Fprintln(w, ": nothing to do")
}

// printLines prints up to 10 lines (all with verbose) under label.
func printLines(w io.Writer, label string, lines []string, all bool) {
	for i, l := range lines {
		if i == 10 && !all {
			fmt.Fprintf(w, "  … %d more (--verbose shows all)\n", len(lines)-i)
			return
		}
		fmt.Fprintf(w, "  %s: %s\n", label, l)
	}
}

var airgapAckCommand = command{
	name:    "airgap ack",
	summary: "settle on the site what central's receipt says it has",
	usage:   "[--config FILE] [--trusted-keys DIR] [--allow-unsigned] [--max-clock-offset D] [--json] RECEIPT",
	help: `Verifies the receipt (digest, signature against --trusted-keys, this
site's id) and settles every operation it names: notifications leave the
buffer, so the forwarder never sends them when the link returns, and the
site's status shows the state central had at import. Cached calls stay
with the site, which still drives any it has not finished. The node's HLC
moves past the receipt's time unless that is more than --max-clock-offset
ahead of this machine's clock (then it is refused and said). A receipt
acked twice settles nothing more.

Example:
  outpost airgap ack --config /etc/outpost/outpost.yaml --trusted-keys /etc/outpost/trusted /media/usb/ship-7.receipt.json`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		trusted := fs.String("trusted-keys", "", "verify the receipt's signature against the *.pub keys in `DIR`")
		allowUnsigned := fs.Bool("allow-unsigned", false, "accept a receipt without a signature")
		maxOffset := fs.Duration("max-clock-offset", 500*time.Millisecond, "refuse to adopt a receipt time further ahead of this clock")
		asJSON := fs.Bool("json", false, "print the result as JSON")
		op, err := loadOperator(fs, args)
		if err != nil {
			return err
		}
		defer op.close()
		if err := checkArgCount(fs.Name(), op.args, 1); err != nil {
			return err
		}
		verify, err := verifyOptions(*trusted, *allowUnsigned)
		if err != nil {
			return err
		}
		res, err := ackReceipt(ctx, op.args[0], op.cfg.Site.Store, airgapsync.AckOptions{
			Verify: verify, Site: op.cfg.Site.ID, Node: op.cfg.Site.Node, MaxClockOffset: *maxOffset, Now: time.Now().UTC(),
		})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(env.Stdout, res)
		}
		fmt.Fprintf(env.Stdout, "receipt %s: settled %d, already settled %d\n", res.ReceiptID, res.Settled, res.AlreadySettled)
		if res.ClockRefused != "" {
			fmt.Fprintf(env.Stdout, "clock not adopted: %s\n", res.ClockRefused)
		}
		return nil
	},
}

func ackReceipt(ctx context.Context, path, storePath string, opts airgapsync.AckOptions) (airgapsync.AckResult, error) {
	r, err := airgapsync.ReadReceipt(path)
	if err != nil {
		return airgapsync.AckResult{}, err
	}
	store, err := sitestore.Open(ctx, storePath, sitestore.Options{})
	if err != nil {
		return airgapsync.AckResult{}, err
	}
	defer store.Close()
	return airgapsync.Ack(ctx, store, r, opts)
}

var airgapListCommand = command{
	name:    "airgap list",
	summary: "the bundles and receipts in a folder, verified or not",
	usage:   "[--source DIR] [--trusted-keys DIR] [--allow-unsigned] [--json] [--verbose]",
	help: `Lists every *.json bundle and receipt in --source (default: the current
directory) with its id, site, nodes, entries, creation time, signer and
whether it verifies against --trusted-keys (with the first problem when
not; --verbose prints every field). An unsigned file verifies only with
--allow-unsigned. Exits non-zero when any file does not verify.

Example:
  outpost airgap list --source /media/usb --trusted-keys /etc/outpost/trusted`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		source := fs.String("source", ".", "the `DIR`ectory to list")
		trusted := fs.String("trusted-keys", "", "verify signatures against the *.pub keys in `DIR`")
		allowUnsigned := fs.Bool("allow-unsigned", false, "count files without a signature as verified")
		asJSON := fs.Bool("json", false, "print the list as JSON")
		verbose := fs.Bool("verbose", false, "print every field of each file")
		rest, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if err := checkArgCount(fs.Name(), rest, 0); err != nil {
			return err
		}
		verify, err := verifyOptions(*trusted, *allowUnsigned)
		if err != nil {
			return err
		}
		summaries, err := airgap.DescribeDir(*source, verify)
		if err != nil {
			return err
		}
		if *asJSON || *verbose {
			err = writeJSON(env.Stdout, nonNil(summaries))
		} else {
			printSummaries(env.Stdout, summaries)
		}
		return errors.Join(err, unverified(*source, summaries))
	},
}

// unverified is an error naming how many of summaries, the files of dir,
// did not verify; nil when all did.
func unverified(dir string, summaries []airgap.Summary) error {
	bad := 0
	for _, s := range summaries {
		if !s.Verified {
			bad++
		}
	}
	if bad == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d file(s) in %s did not verify (see VERIFIED)", bad, len(summaries), dir)
}

func printSummaries(w io.Writer, summaries []airgap.Summary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tTYPE\tID\tSITE\tNODES\tENTRIES\tCREATED\tSIGNER\tVERIFIED")
	for _, s := range summaries {
		verified := "yes"
		if !s.Verified {
			verified = "no: " + s.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", filepath.Base(s.Path), s.Type, s.ID, s.Site,
			strings.Join(s.Nodes, ","), s.Entries, s.CreatedAt.Format(time.RFC3339), or(s.Signer, "-"), verified)
	}
	tw.Flush()
}

// or is v, or def when v is empty.
func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// defaultOperator names who runs the command, for the records it writes:
// $USER, or the account's name where $USER is not set (a service, a
// container), or its uid.
func defaultOperator() string {
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}
