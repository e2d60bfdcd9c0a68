// Package docs holds only this test: it keeps the README short and every
// link in the README and docs/ pointing at a file and heading that exist.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeLimit is the README's size limit in bytes: it is a guide to start
// from, and everything else lives in docs/.
const readmeLimit = 30_000

// testCommand is the command the README gives for the tests and .ci/run runs.
const testCommand = "go test ./... -count=1 -timeout 60m"

// forbidden are texts no document may contain: pointers outside the
// repository and to the notes the work was planned in.
var forbidden = []string{"../shared", "seed 00", "the issue"}

func TestReadmeStaysShort(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatalf("read the README: %v", err)
	}
	if len(readme) > readmeLimit {
		t.Errorf("README.md is %d bytes, over its limit of %d: move sections to docs/ and link them from the README's map", len(readme), readmeLimit)
	}
}

func TestReadmeAndCIRunTheSameTests(t *testing.T) {
	for _, file := range []string{"../README.md", "../.ci/run"} {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("read %s: %v", file, err)
		}
		if !strings.Contains(string(text), testCommand) {
			t.Errorf("%s does not run %q: the README's test command and .ci/run must stay the same", file, testCommand)
		}
	}
}

// hygieneChecks are the commands .ci/run runs before the tests, each of
// which must fail CI when it reports anything.
var hygieneChecks = []string{"go mod tidy -diff", "gofmt -l .", "go vet ./..."}

func TestCIChecksHygieneBeforeTests(t *testing.T) {
	text := read(t, "../.ci/run")
	tests := strings.Index(text, testCommand)
	if tests < 0 {
		t.Fatalf(".ci/run does not run %q", testCommand)
	}
	for _, check := range hygieneChecks {
		at := strings.Index(text, check)
		if at < 0 || at > tests {
			t.Errorf(".ci/run does not run %q before the tests: an untidy module, unformatted file or vet finding must fail CI first", check)
		}
	}
}

func TestLinksResolve(t *testing.T) {
	for _, file := range documents(t) {
		for _, link := range links(read(t, file)) {
			if problem := checkLink(file, link); problem != "" {
				t.Errorf("%s: link %q: %s", file, link, problem)
			}
		}
	}
}

func TestNoForbiddenText(t *testing.T) {
	for _, file := range documents(t) {
		text := strings.ToLower(read(t, file))
		for _, f := range forbidden {
			if strings.Contains(text, f) {
				t.Errorf("%s mentions %q", file, f)
			}
		}
	}
}

// TestSlugsAreGitHubs checks the anchor rule on headings whose anchors
// GitHub is known to give.
func TestSlugsAreGitHubs(t *testing.T) {
	text := "# Outpost\n## Air-gap transfer: a site's work to central and back on a USB stick\n" +
		"```\n# not a heading\n```\n## `outpost bench` rows_and targets\n## Tests\n## Tests\n"
	want := []string{"outpost", "air-gap-transfer-a-sites-work-to-central-and-back-on-a-usb-stick",
		"outpost-bench-rows_and-targets", "tests", "tests-1"}
	if got := slugs(text); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("slugs = %q, want %q", got, want)
	}
}

// documents are the README and every markdown file in docs/.
func documents(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no markdown files in docs/ (%v)", err)
	}
	return append([]string{"../README.md"}, files...)
}

func read(t *testing.T, file string) string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return string(text)
}

var (
	fence      = regexp.MustCompile("(?ms)^ *```.*?^ *```")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#* *$`)
)

// links are the targets of a document's links and images, outside code.
func links(text string) []string {
	text = fence.ReplaceAllString(text, "")
	text = inlineCode.ReplaceAllString(text, "code")
	var out []string
	for _, m := range linkTarget.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// checkLink says what is wrong with a link from file, or "" when the file
// (and heading) it points at exists. Links to other sites are not followed.
func checkLink(file, link string) string {
	if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(link, "#")
	target := file
	if path != "" {
		target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
		if _, err := os.Stat(target); err != nil {
			return "no such file: " + target
		}
	}
	if anchor == "" || !strings.HasSuffix(target, ".md") {
		return ""
	}
	text, err := os.ReadFile(target)
	if err != nil {
		return err.Error()
	}
	for _, slug := range slugs(string(text)) {
		if slug == anchor {
			return ""
		}
	}
	return "no heading in " + target + " has the anchor #" + anchor
}

// slugs are the anchors GitHub gives a document's headings: lower case,
// spaces to '-', punctuation other than '-' and '_' dropped, and a
// repeated slug numbered (-1, -2, …).
func slugs(text string) []string {
	text = fence.ReplaceAllString(text, "")
	seen := map[string]int{}
	var out []string
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		slug := slug(m[1])
		if n := seen[slug]; n > 0 {
			out = append(out, slug+"-"+strconv.Itoa(n))
		} else {
			out = append(out, slug)
		}
		seen[slug]++
	}
	return out
}

func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
