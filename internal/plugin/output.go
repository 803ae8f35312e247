package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// outputFlags are -o and --no-headers, shared by the commands that print tables.
type outputFlags struct {
	format    string
	noHeaders bool
	// structured lists the -o values the command accepts besides the table.
	structured []string
}

func (o *outputFlags) add(cmd *cobra.Command, structured ...string) {
	o.structured = structured
	cmd.Flags().StringVarP(&o.format, "output", "o", "", "output format: "+strings.Join(structured, " or ")+" (a table when unset)")
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "print tables without their header rows")
}

// validate rejects an -o the command cannot print.
func (o *outputFlags) validate() error {
	if o.format == "" || o.format == "table" {
		o.format = ""
		return nil
	}
	for _, s := range o.structured {
		if o.format == s {
			return nil
		}
	}
	return fmt.Errorf("-o %s: this command prints %s, or a table without -o", o.format, strings.Join(o.structured, " or "))
}

// print writes v as the chosen structured format.
func (o *outputFlags) print(w io.Writer, v any) error {
	switch o.format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("no structured output format chosen")
}

// table writes tab-separated rows aligned as kubectl aligns its tables.
type table struct {
	tw interface {
		io.Writer
		Flush() error
	}
	noHeaders bool
}

func newTable(w io.Writer, noHeaders bool) *table {
	return &table{tw: printers.GetNewTabWriter(w), noHeaders: noHeaders}
}

func (t *table) header(cols ...string) {
	if !t.noHeaders {
		t.row(cols...)
	}
}

// row writes one row; an empty cell shows as "-" so that every row splits into the same
// number of fields.
func (t *table) row(cells ...string) {
	shown := make([]string, len(cells))
	for i, c := range cells {
		shown[i] = c
		if c == "" {
			shown[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(shown, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// age prints a duration the way kubectl's AGE column does (5m, 3h2m, 4d).
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}
