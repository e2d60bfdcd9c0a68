package config

import (
	"errors"
	"strings"
	"testing"
)

// Parsing any bytes as a config never panics: it yields a config or
// Problems that each say where and what. `go test` runs the seeds; `go test
// -fuzz FuzzParse ./internal/config` searches further.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "site:\n  id: plant-1\n", "site:\n\tid: x\n", "site: [1, 2]\n", "site:\n  databases:\n    h: 5\n",
		"site:\n  forward_interval: soon\n", "central:\n  smtp:\n    port: 70000\n", "a: &a [*a]\n", "{{{", "site:\n  allow: [x]\n",
		"site:\n  databases:\n    h: {dsn: x.db, allow: [pragma, ddl, exec]}\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		_, err := Parse(strings.NewReader(data), Default())
		if err == nil {
			return
		}
		var problems Problems
		if !errors.As(err, &problems) {
			return // an I/O error reading the input
		}
		for _, p := range problems {
			if p.Message == "" {
				t.Fatalf("a problem without a message in %q", data)
			}
		}
	})
}
