package targets

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
)

// pathParam matches a {name} in a method's path.
var pathParam = regexp.MustCompile(`\{([^{}]+)\}`)

// ExpandPath replaces each {name} in path by the escaped parameter name and
// returns the parameters the path did not use. A missing parameter is an
// *InvalidError.
func ExpandPath(path string, params map[string]any) (string, map[string]any, error) {
	rest := maps.Clone(params)
	if rest == nil {
		rest = map[string]any{}
	}
	var missing string
	out := pathParam.ReplaceAllStringFunc(path, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := params[name]
		if !ok || v == nil {
			if missing == "" {
				missing = name
			}
			return m
		}
		delete(rest, name)
		return url.PathEscape(fmt.Sprint(v))
	})
	if missing != "" {
		return "", nil, &InvalidError{Field: "params." + missing, Reason: fmt.Sprintf("missing: the path %s needs it", path)}
	}
	return out, rest, nil
}
