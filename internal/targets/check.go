package targets

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Problem is a rule a definition breaks. Path names the field as the
// config file's site section spells it, e.g. external_systems.erp.base_url.
type Problem struct {
	Path    string
	Message string
}

// Problems is every rule the definitions Check was given break.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Path + ": " + p.Message
	}
	return fmt.Sprintf("%d problem(s):\n  %s", len(ps), strings.Join(lines, "\n  "))
}

// Check applies the rules of `outpost config check` to external systems
// and databases: nil when they follow them, otherwise Problems, systems
// then databases, each in name order. The config file's are checked by it
// (package config), and the SDK's given in code.
func Check(systems map[string]ExternalSystem, databases map[string]Database) error {
	var c checker
	for _, name := range slices.Sorted(maps.Keys(systems)) {
		c.externalSystem("external_systems."+name, name, systems[name])
	}
	for _, name := range slices.Sorted(maps.Keys(databases)) {
		c.database("databases."+name, name, databases[name])
	}
	if len(c.problems) > 0 {
		return c.problems
	}
	return nil
}

type checker struct{ problems Problems }

func (c *checker) add(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

var targetNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (c *checker) targetName(path, name string) {
	if !targetNameRE.MatchString(name) {
		c.add(path, "name %q must be 1-64 letters, digits, '_' or '-'", name)
	}
}

func (c *checker) externalSystem(path, name string, e ExternalSystem) {
	c.targetName(path, name)
	if u, err := url.Parse(e.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.add(path+".base_url", "%q must be an http:// or https:// URL", e.BaseURL)
	}
	if len(e.Methods) == 0 {
		c.add(path+".methods", "at least one method is required, e.g. createOrder: {verb: POST, path: /orders}")
	}
	for _, m := range slices.Sorted(maps.Keys(e.Methods)) {
		mp := path + ".methods." + m
		c.targetName(mp, m)
		if verbs := []string{"GET", "POST", "PUT", "PATCH", "DELETE"}; !slices.Contains(verbs, e.Methods[m].Verb) {
			c.add(mp+".verb", "%q must be one of %s", e.Methods[m].Verb, strings.Join(verbs, ", "))
		}
		if p := e.Methods[m].Path; p != "" && !strings.HasPrefix(p, "/") {
			c.add(mp+".path", "%q must start with /", p)
		}
	}
	c.positiveDuration(path+".timeout", e.Timeout)
	c.retries(path, e.MaxRetries, e.RetryInterval)
}

func (c *checker) database(path, name string, d Database) {
	c.targetName(path, name)
	switch d.Driver {
	case DriverSQLite:
		if strings.TrimSpace(d.DSN) == "" {
			c.add(path+".dsn", "must not be empty")
		}
	case DriverSQLServer:
		if u, err := url.Parse(d.DSN); err != nil || u.Scheme != "sqlserver" {
			c.add(path+".dsn", "must be a sqlserver:// URL, e.g. sqlserver://outpost@db:1433?database=plant")
		} else if _, set := u.User.Password(); set {
			c.add(path+".dsn", "must not contain the password: name its variable in password_env")
		}
	default:
		c.add(path+".driver", "%q is not a driver: use %s or %s", d.Driver, DriverSQLite, DriverSQLServer)
	}
	c.allow(path+".allow", d.Driver, d.Allow)
	c.positiveDuration(path+".timeout", d.Timeout)
	c.retries(path, d.MaxRetries, d.RetryInterval)
}

// allow checks a database's extra statement classes against its driver.
func (c *checker) allow(path, driver string, classes []string) {
	valid := []string{AllowDDL, AllowPragma, AllowAttach}
	if driver == DriverSQLServer {
		valid = []string{AllowDDL, AllowExec}
	}
	for i, class := range classes {
		if !slices.Contains(valid, class) {
			c.add(fmt.Sprintf("%s[%d]", path, i), "%q is not a statement class of a %s database: use %s",
				class, driver, strings.Join(valid, ", "))
		}
	}
}

func (c *checker) retries(path string, maxRetries int, interval time.Duration) {
	if maxRetries < 0 {
		c.add(path+".max_retries", "%d must be 0 or more", maxRetries)
	}
	c.positiveDuration(path+".retry_interval", interval)
}

func (c *checker) positiveDuration(path string, v time.Duration) {
	if v <= 0 {
		c.add(path, "%s must be a positive duration such as 10s or 1m", v)
	}
}
