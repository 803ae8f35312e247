package chart_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsSetFlagsRender: every `--set`, `--set-json` and `--set-string` the docs give renders
// the chart (its schema included), so an example a user copies works: a ratio given with
// plain --set (a string, which the schema refuses) or a renamed value fails here. Values that
// are placeholders (REGISTRY, TAG, …, <x>) are left out; a value of the remote-seal provider or
// of monitoring renders with the provider or monitoring on.
func TestDocsSetFlagsRender(t *testing.T) {
	flag := regexp.MustCompile(`--(set|set-json|set-string)[ =]('[^']*'|"[^"]*"|[^\s` + "`" + `]+)`)
	placeholder := regexp.MustCompile(`[A-Z]{2,}|…|<|\.\.\.`)
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "charts", "sealfleet", "README.md.gotmpl"))
	n := 0
	for _, p := range pages {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flag.FindAllStringSubmatch(string(raw), -1) {
			kind, arg := m[1], strings.Trim(m[2], `'"`)
			if placeholder.MatchString(arg) || !strings.Contains(arg, "=") {
				continue
			}
			args := []string{"--" + kind, arg}
			switch {
			case strings.HasPrefix(arg, "remoteSeal.") && !strings.Contains(arg, "remoteSeal.enabled"):
				args = append(args, "--set", "remoteSeal.enabled=true,remoteSeal.insecureHTTP=true")
			case strings.HasPrefix(arg, "remoteSeal.enabled=true") && !strings.Contains(arg, "tlsSecret"):
				args = append(args, "--set", "remoteSeal.insecureHTTP=true")
			case strings.HasPrefix(arg, "nodeAgent.nodeSelector.") && strings.HasSuffix(arg, "=null"):
				// install.md: removing the default selector "also" with a selector of one's own.
				args = append(args, "--set", "nodeAgent.nodeSelector.pool=sealers")
			case strings.HasPrefix(arg, "monitoring."):
				args = append(args, "--set", "monitoring.enabled=true")
			}
			n++
			if _, stderr, err := template(t, args...); err != nil {
				t.Errorf("%s: `--%s %s` does not render: %s", filepath.Base(p), kind, arg, strings.TrimSpace(stderr))
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d --set examples in the docs: the pattern no longer matches them", n)
	}
	t.Logf("%d --set examples render", n)
}
