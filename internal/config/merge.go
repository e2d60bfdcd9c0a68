package config

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// overBase readies the file's node n to be decoded over v, the base's value
// at the same place. YAML decodes a map's entries from scratch, so without
// this an entry the file names would lose every field of the base's entry
// it leaves out (the demo system its methods, for one base_url). Instead:
//   - a map the file sets names the entries there are, so v's map is
//     emptied and the decoder fills it from the file alone;
//   - an entry the base has too gets, in its node, the base entry's fields
//     the file leaves out, at every depth (a method keeps its verb).
func overBase(n *yaml.Node, v reflect.Value) error {
	if n.Kind != yaml.MappingNode {
		return nil // a scalar or list where a section belongs: the decoder reports it
	}
	switch v.Kind() {
	case reflect.Struct:
		fields := fieldIndexes(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			if f, ok := fields[n.Content[i].Value]; ok {
				if err := overBase(n.Content[i+1], v.Field(f)); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.Struct {
			for i := 0; i+1 < len(n.Content); i += 2 {
				base := v.MapIndex(reflect.ValueOf(n.Content[i].Value).Convert(v.Type().Key()))
				if !base.IsValid() {
					continue
				}
				if err := fillFromBase(n.Content[i+1], base); err != nil {
					return fmt.Errorf("%s: %w", n.Content[i].Value, err)
				}
			}
		}
		v.SetZero()
	}
	return nil
}

// fillFromBase adds to an entry's node the fields of the base's entry that
// it leaves out, after doing the same for the maps inside it.
func fillFromBase(n *yaml.Node, base reflect.Value) error {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	entry := reflect.New(base.Type()).Elem() // a map's value cannot be changed in place
	entry.Set(base)
	if err := overBase(n, entry); err != nil {
		return err
	}
	var full yaml.Node
	if err := full.Encode(entry.Interface()); err != nil {
		return fmt.Errorf("encode the default entry: %w", err)
	}
	set := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		set[n.Content[i].Value] = true
	}
	for i := 0; i+1 < len(full.Content); i += 2 {
		if !set[full.Content[i].Value] {
			n.Content = append(n.Content, full.Content[i], full.Content[i+1])
		}
	}
	return nil
}

// fieldIndexes maps the YAML name of each field of struct type t to its index.
func fieldIndexes(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			out[name] = i
		}
	}
	return out
}

// followDemo keeps the dev defaults' demo entries pointing at the demo
// system and database `outpost dev` runs: a file that moves dev.demo_system
// or dev.demo_database moves the entry's base_url or dsn with it (else a
// moved demo system would leave its calls going to whatever listens at the
// old address), unless the file names that base_url or dsn itself.
func (c *checker) followDemo(base Config, cfg *Config) {
	if e, ok := cfg.Site.ExternalSystems[demoSystem]; ok && cfg.Dev.DemoSystem != "" &&
		e.BaseURL == demoBaseURL(base.Dev.DemoSystem) && !c.named("site.external_systems."+demoSystem+".base_url") {
		e.BaseURL = demoBaseURL(cfg.Dev.DemoSystem)
		cfg.Site.ExternalSystems[demoSystem] = e
	}
	if d, ok := cfg.Site.Databases[demoDatabase]; ok && cfg.Dev.DemoDatabase != "" &&
		d.DSN == base.Dev.DemoDatabase && !c.named("site.databases."+demoDatabase+".dsn") {
		d.DSN = cfg.Dev.DemoDatabase
		cfg.Site.Databases[demoDatabase] = d
	}
}

// named reports whether the file has the key at path.
func (c *checker) named(path string) bool {
	_, ok := c.lines[path]
	return ok
}
