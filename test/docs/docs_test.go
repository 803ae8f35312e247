// Package docs_test checks the facts the documentation states against the code that defines
// them: metric names, the metrics the alert rules read, and the chart values the docs set.
// A metric, rule or value renamed or added without its page fails `go test ./...`.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	sealv1 "github.com/sealfleet/sealfleet/api/v1alpha1"
	"github.com/sealfleet/sealfleet/internal/render"
)

var root = func() string { r, _ := filepath.Abs(filepath.Join("..", "..")); return r }()

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// names is every first submatch of re in the files matching the globs, sorted and unique.
func names(t *testing.T, re *regexp.Regexp, globs ...string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, g := range globs {
		files, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				seen[m[1]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestEveryMetricIsDocumented: each metric the operator, the node agent and the sealer export
// is named on the page that lists its component's metrics.
func TestEveryMetricIsDocumented(t *testing.T) {
	goMetric := regexp.MustCompile(`(?:Name:\s*|NewDesc\()"(sealfleet_[a-z0-9_]+)"`)
	for _, c := range []struct {
		globs []string
		pages []string
		min   int
	}{
		{[]string{"controllers/*.go"}, []string{"docs/monitoring.md"}, 15},
		{[]string{"internal/nodeagent/*.go", "cmd/node-agent/*.go"}, []string{"docs/node-agent.md"}, 4},
	} {
		found := names(t, goMetric, c.globs...)
		if len(found) < c.min {
			t.Fatalf("found only %d metrics in %v (%v): the pattern no longer matches how they are declared", len(found), c.globs, found)
		}
		for _, m := range found {
			if !mentionedIn(t, m, c.pages) {
				t.Errorf("metric %s (%v) is not named in %v", m, c.globs, c.pages)
			}
		}
	}
	rustMetric := regexp.MustCompile(`"(sealer_[a-z0-9_]+)"`)
	found := names(t, rustMetric, "sealer-image/crates/*/src/*.rs", "sealer-image/crates/*/src/*/*.rs")
	if len(found) < 8 {
		t.Fatalf("found only %d sealer metrics (%v): the pattern no longer matches", len(found), found)
	}
	for _, m := range found {
		if !mentionedIn(t, m, []string{"docs/monitoring.md", "sealer-image/README.md"}) {
			t.Errorf("sealer metric %s is not named in docs/monitoring.md or sealer-image/README.md", m)
		}
	}
}

func mentionedIn(t *testing.T, name string, pages []string) bool {
	word := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	for _, p := range pages {
		if word.MatchString(read(t, p)) {
			return true
		}
	}
	return false
}

// TestMetricsTheAlertsReadAreListed: the metric list of docs/monitoring.md holds every metric
// an alert or recording rule reads, so a reader can find what each alert watches.
func TestMetricsTheAlertsReadAreListed(t *testing.T) {
	rules := names(t, regexp.MustCompile(`\b((?:sealfleet|sealer)_[a-z0-9_]+)\b`), "charts/sealfleet/files/rules.yaml")
	if len(rules) < 10 {
		t.Fatalf("rules read only %v", rules)
	}
	doc := read(t, "docs/monitoring.md")
	start := strings.Index(doc, "## Metrics the rules read")
	if start < 0 {
		t.Fatal(`docs/monitoring.md has no "## Metrics the rules read" section`)
	}
	section := doc[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, m := range rules {
		if !strings.Contains(section, "`"+m) {
			t.Errorf("the rules read %s, which docs/monitoring.md#metrics-the-rules-read does not list", m)
		}
	}
}

// TestValuesTheDocsSetExist: every `--set key=…` in the docs names a value of the chart's
// values.yaml (a map's own keys, such as labels, excepted).
func TestValuesTheDocsSetExist(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal([]byte(read(t, "charts/sealfleet/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	set := regexp.MustCompile(`--set(?:-json|-string)?[ =]'?((?:[a-zA-Z0-9_\\.-]+(?:\[[0-9]+\])?)+)=`)
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append(pages, filepath.Join(root, "README.md"))
	n := 0
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range set.FindAllStringSubmatch(string(b), -1) {
			// One --set may carry several comma-separated assignments.
			for _, kv := range splitAssignments(m[0][strings.Index(m[0], m[1]):] + restOf(string(b), m[0])) {
				n++
				if !hasValue(values, kv) {
					t.Errorf("%s: --set %s names no value in charts/sealfleet/values.yaml", filepath.Base(p), kv)
				}
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d --set keys in the docs: the pattern no longer matches", n)
	}
}

// restOf is the rest of the token after the match, up to whitespace or a quote.
func restOf(doc, match string) string {
	i := strings.Index(doc, match) + len(match)
	j := i
	for j < len(doc) && !strings.ContainsRune(" \t\n'`\"", rune(doc[j])) {
		j++
	}
	return doc[i:j]
}

// splitAssignments turns "a.b=1,c.d=x" into its keys [a.b c.d] (braces keep their commas).
func splitAssignments(s string) []string {
	var keys []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] == '{' {
			depth++
		}
		if i < len(s) && s[i] == '}' {
			depth--
		}
		if i == len(s) || (s[i] == ',' && depth == 0) {
			part := s[start:i]
			if k, _, ok := strings.Cut(part, "="); ok && k != "" && !strings.ContainsAny(k, "{}") {
				keys = append(keys, k)
			}
			start = i + 1
		}
	}
	return keys
}

// freeForm are the maps whose keys are the user's (label and annotation maps).
var freeForm = map[string]bool{"nodeSelector": true, "labels": true, "annotations": true, "podAnnotations": true, "alertLabels": true}

// hasValue walks a dotted key ("a.b\.c.d", list indexes "x[0].name") through values; a key
// under a map that values.yaml leaves empty ({}) is a free-form entry and counts.
func hasValue(values map[string]any, key string) bool {
	parts := regexp.MustCompile(`(?:\\\.|[^.])+`).FindAllString(key, -1)
	var cur any = values
	last := ""
	for _, p := range parts {
		p = strings.ReplaceAll(p, `\.`, ".")
		if i := strings.Index(p, "["); i >= 0 {
			p = p[:i]
		}
		m, ok := cur.(map[string]any)
		if !ok {
			_, isList := cur.([]any)
			return isList
		}
		if len(m) == 0 || freeForm[last] {
			return true
		}
		last = p
		next, ok := m[p]
		if !ok {
			return false
		}
		if list, isList := next.([]any); isList && len(list) == 0 {
			return true
		}
		cur = next
	}
	return true
}

// TestReadmeGoVersionIsGoMods: the Go version README.md asks for is go.mod's `go` line.
func TestReadmeGoVersionIsGoMods(t *testing.T) {
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(read(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	if want := "Go ≥ " + m[1]; !strings.Contains(read(t, "README.md"), want) {
		t.Errorf("README.md does not ask for %q (go.mod's go line)", want)
	}
}

// TestBatchPageNamesWhatTheOperatorCreates: docs/batches.md names the operator's objects for a
// batch as internal/render names them in the sealer namespace (a batch named <batch> whose UID
// starts <uid8>).
func TestBatchPageNamesWhatTheOperatorCreates(t *testing.T) {
	doc := read(t, "docs/batches.md")
	b := &sealv1.SealBatch{ObjectMeta: metav1.ObjectMeta{Name: "<batch>", UID: "<uid8>"}}
	h := render.Home{Namespace: "sealfleet-system"}
	for _, name := range []string{h.ConfigMapName(b), h.DisruptionBudgetName(b), h.SeedsConfigMapName(b),
		strings.TrimSuffix(h.PodName(b, 1), "1") + "<attempt>", strings.TrimSuffix(h.C1PodName(b, 1), "1") + "<attempt>"} {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/batches.md does not name `%s`", name)
		}
	}
}
