package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestDocsNameEveryCommandAndFlag: docs/batches.md's "kubectl sealfleet" section names every
// subcommand and each of its own flags, so a flag added to the plugin and not to the page
// fails here.
func TestDocsNameEveryCommandAndFlag(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "batches.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## kubectl sealfleet")
	if start < 0 {
		t.Fatal(`docs/batches.md has no "## kubectl sealfleet" section`)
	}
	section := doc[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, c := range NewRootCommand(Env{}).Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if !strings.Contains(section, "kubectl sealfleet "+c.Name()) {
			t.Errorf("docs/batches.md#kubectl-sealfleet does not show `kubectl sealfleet %s`", c.Name())
			continue
		}
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			if !mentions(section, c, f) {
				t.Errorf("docs/batches.md#kubectl-sealfleet does not give `kubectl sealfleet %s` its flag --%s", c.Name(), f.Name)
			}
		})
	}
}

// mentions reports whether a line of the section that shows the command gives the flag (long,
// or its shorthand), or the prose names it for the command ("-o json|yaml for `status`").
func mentions(section string, c *cobra.Command, f *pflag.Flag) bool {
	forms := []string{"--" + f.Name}
	if f.Shorthand != "" {
		forms = append(forms, "-"+f.Shorthand+" ", "["+"-"+f.Shorthand, "`-"+f.Shorthand)
	}
	for _, line := range strings.Split(section, "\n") {
		if !strings.Contains(line, "sealfleet "+c.Name()) && !strings.Contains(line, "`"+c.Name()+"`") {
			continue
		}
		for _, form := range forms {
			if strings.Contains(line, form) {
				return true
			}
		}
	}
	return false
}
