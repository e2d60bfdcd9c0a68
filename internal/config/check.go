package config

import (
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/targets"

	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong with a config file.
type Problem struct {
	Path    string // e.g. central.smtp.port
	Line    int    // 0 when unknown
	Message string
}

func (p Problem) String() string {
	switch {
	case p.Path != "" && p.Line > 0:
		return p.Path + " (line " + strconv.Itoa(p.Line) + "): " + p.Message
	case p.Path != "":
		return p.Path + ": " + p.Message
	case p.Line > 0:
		return "line " + strconv.Itoa(p.Line) + ": " + p.Message
	}
	return "(file): " + p.Message
}

// Problems is every problem found in a config file.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%d problem(s):\n  %s", len(ps), strings.Join(lines, "\n  "))
}

func parse(data []byte, cfg Config) (Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, Problems{syntaxProblem(data, err)}
	}
	if len(root.Content) == 0 {
		root.Content = []*yaml.Node{{Kind: yaml.MappingNode}} // an empty file means all defaults
	}
	c := &checker{lines: map[string]int{}, pathAtLine: map[int]string{}}
	c.walk(root.Content[0], reflect.TypeOf(cfg), "")
	if root.Content[0].Kind != yaml.MappingNode {
		return Config{}, Problems{{Line: root.Content[0].Line, Message: "the file must be a mapping of sections (temporal, site, central, dev, log, telemetry)"}}
	}
	base := cfg
	if err := overBase(root.Content[0], reflect.ValueOf(&cfg).Elem()); err != nil {
		return Config{}, err
	}
	if err := root.Content[0].Decode(&cfg); err != nil {
		c.typeErrors(err)
	}
	c.followDemo(base, &cfg)
	c.validate(cfg) // fields with type errors kept their defaults: no double report
	if len(c.problems) > 0 {
		sort.SliceStable(c.problems, func(i, j int) bool { return c.problems[i].Line < c.problems[j].Line })
		return Config{}, c.problems
	}
	return cfg, nil
}

type checker struct {
	problems   Problems
	lines      map[string]int // key path → line
	pathAtLine map[int]string // line → key path, to place YAML type errors
}

func (c *checker) add(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Path: path, Line: c.lines[path], Message: fmt.Sprintf(format, args...)})
}

// walk records where every key is and reports keys the Config does not have.
func (c *checker) walk(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice {
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			c.lines[p], c.pathAtLine[item.Line] = item.Line, p
		}
		return
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			p := join(path, key.Value)
			c.lines[p], c.pathAtLine[key.Line] = key.Line, p
			ft, ok := fields[key.Value]
			if !ok {
				c.add(p, "unknown field (known: %s)", strings.Join(sortedKeys(fields), ", "))
				continue
			}
			c.walk(val, ft, p)
		}
	case reflect.Map:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			c.lines[p], c.pathAtLine[n.Content[i].Line] = n.Content[i].Line, p
			c.walk(n.Content[i+1], t.Elem(), p)
		}
	}
}

var lineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// typeErrors turns YAML's "line N: cannot unmarshal ..." into path problems.
func (c *checker) typeErrors(err error) {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		c.problems = append(c.problems, Problem{Message: err.Error()})
		return
	}
	for _, msg := range te.Errors {
		m := lineRE.FindStringSubmatch(msg)
		if m == nil {
			c.problems = append(c.problems, Problem{Message: msg})
			continue
		}
		line, _ := strconv.Atoi(m[1])
		c.problems = append(c.problems, Problem{Path: c.pathAtLine[line], Line: line, Message: plainTypeError(m[2])})
	}
}

var (
	syntaxLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	typeErrorRE  = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
)

// syntaxProblem says what is wrong with a file YAML cannot read, naming a
// tab as a tab: YAML indents with spaces only, and its own message does
// not say so.
func syntaxProblem(data []byte, err error) Problem {
	m := syntaxLineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return Problem{Message: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(data), "\n")
	if strings.Contains(m[2], "tab character") {
		line = tabIndentedLine(lines, line)
	}
	if line >= 1 && line <= len(lines) && strings.Contains(lines[line-1], "\t") {
		return Problem{Line: line, Message: "a tab character: YAML indents with spaces only (replace the tab with spaces)"}
	}
	return Problem{Line: line, Message: "not valid YAML: " + m[2]}
}

// tabIndentedLine is the first line from line on whose indentation holds a
// tab (line itself if none does). YAML reports a tab that "violates
// indentation" at the line of its error's context, the value it was reading
// when it met the tab, which starts on a line before the tab's.
func tabIndentedLine(lines []string, line int) int {
	for i := max(line, 1); i <= len(lines); i++ {
		text := lines[i-1]
		if indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]; strings.Contains(indent, "\t") {
			return i
		}
	}
	return line
}

// plainTypeError rewrites YAML's "cannot unmarshal !!seq into string" as
// what the field wants and what it got, in words.
func plainTypeError(msg string) string {
	m := typeErrorRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	return "must be " + wantedKind(m[3]) + ", not " + yamlKind(m[1], m[2])
}

func wantedKind(goType string) string {
	switch {
	case goType == "string":
		return "text"
	case goType == "time.Duration":
		return "a duration like 30s or 5m"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	}
	return "a section of fields (name: value lines indented under it)"
}

func yamlKind(tag, value string) string {
	switch tag {
	case "seq":
		return "a list"
	case "map":
		return "a section of fields"
	case "str":
		return fmt.Sprintf("the text %q", value)
	case "int", "float":
		return "the number " + value
	case "bool":
		return value
	case "null":
		return "an empty value"
	}
	return value
}

// maxListNameChars is the central store's limit on a list name (its audit
// operation id "list/NAME" fits 64 characters with a channel's).
const maxListNameChars = 56

func (c *checker) validate(cfg Config) {
	c.hostPort("temporal.address", cfg.Temporal.Address)
	c.nonEmpty("temporal.namespace", cfg.Temporal.Namespace)

	if !contract.IsSiteName(cfg.Site.ID) {
		c.add("site.id", "%q must be 1-64 letters, digits, '.', '_' or '-' (it names the task queue outpost-site-<id>)", cfg.Site.ID)
	}
	if !contract.IsSiteName(cfg.Site.Node) {
		c.add("site.node", "%q must be 1-64 letters, digits, '.', '_' or '-' (central stores it in a 64-character column)", cfg.Site.Node)
	}
	c.nonEmpty("site.store", cfg.Site.Store)
	c.temporalTLS(cfg.Temporal)
	for i, k := range cfg.Temporal.EncryptionKeys {
		path := fmt.Sprintf("temporal.encryption_keys[%d]", i)
		c.nonEmpty(path+".id", k.ID)
		if (k.File == "") == (k.Env == "") {
			c.add(path, "give the key in exactly one of file and env")
		}
	}
	c.hostPort("site.listen", cfg.Site.Listen)
	if _, _, err := net.SplitHostPort(cfg.Site.Listen); err == nil && !IsLoopback(cfg.Site.Listen) && len(cfg.Site.APITokens) == 0 {
		c.add("site.listen", "%q is reachable beyond this host: name a token in site.api_tokens (the API runs writes and calls for whoever asks)", cfg.Site.Listen)
	}
	if (cfg.Site.TLSCertFile == "") != (cfg.Site.TLSKeyFile == "") {
		c.add("site.tls_cert_file", "give both tls_cert_file and tls_key_file, or neither")
	}
	for _, name := range sortedKeys(cfg.Site.APITokens) {
		c.nonEmpty("site.api_tokens."+name, cfg.Site.APITokens[name])
	}
	c.oneOf("site.workflow_summary", cfg.Site.WorkflowSummary, SummaryFull, SummaryListOnly)
	c.positiveDuration("site.forward_interval", cfg.Site.ForwardInterval)
	c.positiveDuration("site.poll_interval", cfg.Site.PollInterval)
	c.positive("site.forward_batch", cfg.Site.ForwardBatch)
	c.positive("site.forward_parallelism", cfg.Site.ForwardParallelism)
	if cfg.Site.ForwardMaxInFlight < cfg.Site.ForwardParallelism {
		c.add("site.forward_max_in_flight", "%d is under site.forward_parallelism (%d): the forwarder starts with that many hand-offs in flight, so the bound must be at least as many", cfg.Site.ForwardMaxInFlight, cfg.Site.ForwardParallelism)
	}
	c.positive("site.max_body_bytes", cfg.Site.MaxBodyBytes)
	if cfg.Site.MaxBodyBytes > contract.MaxBodyBytesLimit {
		c.add("site.max_body_bytes", "%d is over %d (256 KiB): a larger notification could exceed Temporal's 2 MB payload limit and never leave the site", cfg.Site.MaxBodyBytes, contract.MaxBodyBytesLimit)
	}
	c.positive("site.commit_batch", cfg.Site.CommitBatch)
	c.positiveDuration("site.commit_delay", cfg.Site.CommitDelay)
	c.positiveDuration("site.tracking_retention", cfg.Site.TrackingRetention)
	c.positiveDuration("site.purge_interval", cfg.Site.PurgeInterval)
	c.positive("site.telemetry_batch", cfg.Site.TelemetryBatch)
	c.positiveDuration("site.telemetry_delay", cfg.Site.TelemetryDelay)
	c.positiveDuration("site.reconcile_interval", cfg.Site.ReconcileInterval)
	c.positiveDuration("site.poller_check_interval", cfg.Site.PollerCheckInterval)
	if least := cfg.Site.PollerCheckInterval + temporalLongPoll; cfg.Site.HolderGrace <= least {
		c.add("site.holder_grace", "%s must be longer than site.poller_check_interval plus a minute (%s): an idle daemon's "+
			"poller shows activity only once a minute (Temporal's long poll), and a shorter grace takes the site from a live one", cfg.Site.HolderGrace, least)
	}
	c.peer(cfg.Site)
	c.targets("site.", cfg.Site.ExternalSystems, cfg.Site.Databases)
	c.region("site", cfg.Site.Region, cfg.Site.RegionQueue)
	c.region("central", cfg.Central.Region, cfg.Central.RegionQueue)
	c.siteInCentralsRegion(cfg)

	c.centralStore(cfg.Central.Store)
	c.hostPort("central.listen", cfg.Central.Listen)
	if u, err := url.Parse(cfg.Central.TemporalUIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		c.add("central.temporal_ui_url", "%q must be an http:// or https:// URL", cfg.Central.TemporalUIURL)
	}
	c.pageAuth(cfg.Central)
	c.positiveDuration("central.stuck_age", cfg.Central.StuckAge)
	c.positiveDuration("central.retention.notifications", cfg.Central.Retention.Notifications)
	c.positiveDuration("central.retention.site_calls", cfg.Central.Retention.SiteCalls)
	c.positiveDuration("central.retention.audit_log", cfg.Central.Retention.AuditLog)
	c.positive("central.retention.purge_batch", cfg.Central.Retention.PurgeBatch)
	c.smtp(cfg.Central.SMTP)
	for _, name := range sortedKeys(cfg.Central.Lists) {
		if !contract.IsSiteName(name) || len(name) > maxListNameChars {
			c.add("central.lists."+name, "list name: want 1-%d letters, digits, '.', '_' or '-'", maxListNameChars)
		}
		for i, addr := range cfg.Central.Lists[name] {
			if _, err := mail.ParseAddress(addr); err != nil {
				c.add(fmt.Sprintf("central.lists.%s[%d]", name, i), "%q is not an email address", addr)
			}
		}
	}

	c.nonEmpty("dev.data_dir", cfg.Dev.DataDir)
	if cfg.Dev.TemporalUIPort != 0 {
		c.port("dev.temporal_ui_port", cfg.Dev.TemporalUIPort)
	}
	c.hostPort("dev.sink_http", cfg.Dev.SinkHTTP)
	if cfg.Dev.DemoSystem != "" {
		c.hostPort("dev.demo_system", cfg.Dev.DemoSystem)
	}
	c.oneOf("log.level", cfg.Log.Level, "debug", "info", "warn", "error")
	c.oneOf("log.format", cfg.Log.Format, "console", "json")
	c.otlpEndpoint("telemetry.otlp_endpoint", cfg.Telemetry.OTLPEndpoint)
}

// region checks a section's region name and that a region queue has a region.
func (c *checker) region(section, name string, ownQueue bool) {
	if name != "" {
		if err := contract.CheckRegionName(name); err != nil {
			c.add(section+".region", "%s", err)
		}
	}
	if ownQueue && name == "" {
		c.add(section+".region_queue", "needs %s.region: the queue is outpost-central-<region>", section)
	}
}

// siteInCentralsRegion refuses, in a file with both a site and a central
// section, a site whose work this central would not take: another region
// (its worker refuses the site's workflows) or the same region routed
// another way (the site hands off to a queue nobody polls).
func (c *checker) siteInCentralsRegion(cfg Config) {
	_, hasSite := c.lines["site"]
	_, hasCentral := c.lines["central"]
	if !hasSite || !hasCentral {
		return
	}
	site, central := cfg.Site, cfg.Central
	if site.Region != central.Region {
		c.add("site.region", "site is in %s but this file's central serves %s: set both to the region that owns this site's work",
			contract.RegionWords(site.Region), contract.RegionWords(central.Region))
		return
	}
	if site.Region != "" && site.RegionQueue != central.RegionQueue {
		c.add("site.region_queue", "%t here but central.region_queue is %t: both must route region %s the same way",
			site.RegionQueue, central.RegionQueue, site.Region)
	}
}

// pageUserRegions checks the regions a page user is limited to: valid
// names, on a central that serves a region (on one that serves none, the
// user could never use the page).
func (c *checker) pageUserRegions(path string, regions []string, served string) {
	if len(regions) > 0 && served == "" {
		c.add(path, "this central serves no region (central.region), so a user limited to regions can never use its page: set central.region or remove regions")
	}
	for i, name := range regions {
		if err := contract.CheckRegionName(name); err != nil {
			c.add(fmt.Sprintf("%s[%d]", path, i), "%s", err)
		}
	}
}

// otlpEndpoint checks a collector's address: empty (tracing off) or an
// http(s) URL of a host and port, which is all an OTLP/gRPC exporter dials.
func (c *checker) otlpEndpoint(path, endpoint string) {
	if endpoint == "" {
		return
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Port() == "" ||
		strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		c.add(path, "%q must be a collector's OTLP/gRPC address, http://host:port (https:// for TLS), like http://otel-collector:4317", endpoint)
	}
}

// temporalTLS checks that the mutual-TLS files exist and parse.
// peer checks the pair settings: an http(s) address, the secret's
// variable, a mode and a failover time a heartbeat can meet.
func (c *checker) peer(s Site) {
	c.oneOf("site.replication", s.Replication, ReplicationAsync, ReplicationSync)
	if s.FailoverAfter < time.Second {
		c.add("site.failover_after", "%s is under 1s: the nodes exchange heartbeats a few times per failover_after, and a "+
			"shorter one takes over from a live node on a busy moment", s.FailoverAfter)
	}
	if s.Peer.Address == "" {
		if s.Peer.SecretEnv != "" || s.Peer.Prefer || s.Peer.CAFile != "" {
			c.add("site.peer.address", "set the other node's address (http://host:port), or remove site.peer")
		}
		return
	}
	if u, err := url.Parse(s.Peer.Address); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.add("site.peer.address", "%q must be the other node's API as a URL, http://host:port or https://host:port", s.Peer.Address)
	}
	c.nonEmpty("site.peer.secret_env", s.Peer.SecretEnv)
}

func (c *checker) temporalTLS(t Temporal) {
	if (t.TLSCertFile == "") != (t.TLSKeyFile == "") {
		c.add("temporal.tls_cert_file", "give both tls_cert_file and tls_key_file, or neither")
	} else if t.TLSCertFile != "" {
		if _, err := tls.LoadX509KeyPair(t.TLSCertFile, t.TLSKeyFile); err != nil {
			c.add("temporal.tls_cert_file", "%s with %s: %v", t.TLSCertFile, t.TLSKeyFile, err)
		}
	}
	if t.TLSCAFile != "" {
		if _, err := LoadCertPool(t.TLSCAFile); err != nil {
			c.add("temporal.tls_ca_file", "%v", err)
		}
	}
}

// pageAuth checks who may use the outbox page.
func (c *checker) pageAuth(cfg Central) {
	a := cfg.PageAuth
	if _, _, err := net.SplitHostPort(cfg.Listen); err == nil && !IsLoopback(cfg.Listen) && !a.Enabled() {
		c.add("central.listen", "%q is reachable beyond this host: configure central.page_auth (users or proxy_header), or anyone who reaches it can retry and discard", cfg.Listen)
	}
	for _, name := range sortedKeys(a.Users) {
		u, path := a.Users[name], "central.page_auth.users."+name
		if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
			c.add(path+".password_hash", "is not a bcrypt hash: make one with `outpost central hash-password`")
		}
		c.oneOf(path+".role", u.Role, "operator", "viewer")
		c.pageUserRegions(path+".regions", u.Regions, cfg.Region)
	}
	if a.ProxyHeader != "" && len(a.TrustedProxies) == 0 {
		c.add("central.page_auth.trusted_proxies", "name the proxy's addresses: proxy_header is trusted only from them")
	}
	for i, p := range a.TrustedProxies {
		if _, err := ParseTrustedProxy(p); err != nil {
			c.add(fmt.Sprintf("central.page_auth.trusted_proxies[%d]", i), "%v", err)
		}
	}
	c.positiveDuration("central.page_auth.session_ttl", a.SessionTTL)
	for i, o := range cfg.CodecOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			c.add(fmt.Sprintf("central.codec_origins[%d]", i), "%q must be an origin like https://temporal-ui.example.com:8233", o)
		}
	}
}

// targets checks the site's external systems and databases by their own
// rules (targets.Check), placing each problem under prefix at its line.
func (c *checker) targets(prefix string, systems map[string]ExternalSystem, databases map[string]Database) {
	var problems targets.Problems
	if !errors.As(targets.Check(systems, databases), &problems) {
		return
	}
	for _, p := range problems {
		c.add(prefix+p.Path, "%s", p.Message)
	}
}

func (c *checker) retries(path string, maxRetries int, interval time.Duration) {
	if maxRetries < 0 {
		c.add(path+".max_retries", "%d must be 0 or more", maxRetries)
	}
	c.positiveDuration(path+".retry_interval", interval)
}

func (c *checker) centralStore(s CentralStore) {
	switch s.Driver {
	case DriverSQLite:
		c.nonEmpty("central.store.path", s.Path)
	case DriverSQLServer:
		c.centralStoreDSN(s, "sqlserver://outpost@db:1433?database=outpost", "sqlserver")
	case DriverPostgres:
		c.centralStoreDSN(s, "postgres://outpost@db:5432/outpost", "postgres", "postgresql")
	default:
		c.add("central.store.driver", "%q is not a driver: use %s, %s or %s", s.Driver, DriverSQLite, DriverSQLServer, DriverPostgres)
	}
}

// centralStoreDSN checks a database server's URL: set, of one of schemes
// (the first is the one example shows), and without the password, which
// comes from the variable password_env names.
func (c *checker) centralStoreDSN(s CentralStore, example string, schemes ...string) {
	if s.DSN == "" {
		c.add("central.store.dsn", "required with driver %s, e.g. %s", s.Driver, example)
	} else if u, err := url.Parse(s.DSN); err != nil || !slices.Contains(schemes, u.Scheme) {
		c.add("central.store.dsn", "must be a %s:// URL (the password comes from $%s)", schemes[0], s.PasswordEnv)
	} else if _, set := u.User.Password(); set {
		c.add("central.store.dsn", "must not contain the password: put it in $%s", s.PasswordEnv)
	}
}

func (c *checker) smtp(s SMTP) {
	c.nonEmpty("central.smtp.host", s.Host)
	c.port("central.smtp.port", s.Port)
	if _, err := mail.ParseAddress(s.From); err != nil {
		c.add("central.smtp.from", "%q is not an email address", s.From)
	}
	c.oneOf("central.smtp.tls", s.TLS, SMTPTLSNone, SMTPTLSOpportunistic, SMTPTLSStartTLS, SMTPTLSImplicit)
	c.positiveDuration("central.smtp.timeout", s.Timeout)
	c.positiveDuration("central.smtp.final_reply_timeout", s.FinalReplyTimeout)
	c.retries("central.smtp", s.MaxRetries, s.RetryInterval)
	if s.Username != "" && s.PasswordEnv == "" {
		c.add("central.smtp.password_env", "required with a username: the name of the variable holding the password")
	}
}

func (c *checker) nonEmpty(path, v string) {
	if strings.TrimSpace(v) == "" {
		c.add(path, "must not be empty")
	}
}

func (c *checker) hostPort(path, v string) {
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		c.add(path, "%q must be host:port", v)
	}
}

func (c *checker) port(path string, v int) {
	if v < 1 || v > 65535 {
		c.add(path, "%d must be a port, 1-65535", v)
	}
}

func (c *checker) positive(path string, v int) {
	if v <= 0 {
		c.add(path, "%d must be greater than 0", v)
	}
}

// temporalLongPoll is how long Temporal holds an idle poll before answering
// it empty (matching.longPollExpirationInterval).
const temporalLongPoll = time.Minute

func (c *checker) positiveDuration(path string, v time.Duration) {
	if v <= 0 {
		c.add(path, "%s must be a positive duration such as 10s or 1m", v)
	}
}

func (c *checker) oneOf(path, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	c.add(path, "%q must be one of %s", v, strings.Join(allowed, ", "))
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	return fields
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Production risks: defaults right on a developer's machine that a
// production system must not keep. `config check --production` reports
// them and `outpost central` and `outpost site` log them at start.
var productionRisks = []struct {
	path    string
	present func(Config) bool
	risk    string
}{
	{"temporal.encryption_keys", func(c Config) bool { return len(c.Temporal.EncryptionKeys) > 0 },
		"every payload Outpost writes to Temporal (notification subjects and bodies, call parameters, SQL and its arguments) " +
			"is plain text in the workflow history, for anyone with Web UI or temporal CLI access: name a key " +
			"(head -c 32 /dev/urandom | base64) in every process's config"},
	{"site.api_tokens", func(c Config) bool { return len(c.Site.APITokens) > 0 },
		"any process on the site host can send notifications, call external systems and write SQL to the site's databases " +
			"through the site API, and the audit trail cannot name who did: name a token for each caller"},
}

// ProductionRisk is what leaving the setting at path empty risks, and
// whether cfg does; "" when it does not (or path names no such setting).
func ProductionRisk(cfg Config, path string) string {
	for _, r := range productionRisks {
		if r.path == path && !r.present(cfg) {
			return r.risk
		}
	}
	return ""
}

// ProductionProblems is every production risk cfg runs; with paths, only
// the risks of those settings (the ones one process cares about).
func ProductionProblems(cfg Config, paths ...string) Problems {
	var ps Problems
	for _, r := range productionRisks {
		if len(paths) > 0 && !slices.Contains(paths, r.path) {
			continue
		}
		if !r.present(cfg) {
			ps = append(ps, Problem{Path: r.path, Message: "empty: " + r.risk})
		}
	}
	return ps
}
