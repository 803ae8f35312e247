// Command troubleshooting writes docs/troubleshooting.md, the symptom-first guide to every
// reason the operator and the node agent write, from the code and a hand-written catalogue:
//
//   - the reason constants of api/v1alpha1/conditions.go (names, values, doc comments), read
//     with go/parser;
//   - the event reasons the code writes as string literals (or as a condition type), found in
//     the calls that record events under controllers/, internal/ and cmd/;
//   - the messages placement writes when no node fits a batch, found in the functions that
//     return them (pendingSources);
//   - the sealer's exit codes, contracts/exit-codes.json;
//   - docs/troubleshooting/reasons.yaml, what each of those means and how to fix it, and
//     docs/troubleshooting/intro.md, the page's opening.
//
// It fails, naming the reason and the file to edit, when the code writes a reason the catalogue
// has no entry for, or the catalogue describes one the code no longer has; and when a link in
// the page points at a file or heading that does not exist.
//
//	go run ./hack/troubleshooting          write docs/troubleshooting.md
//	go run ./hack/troubleshooting -check   fail when docs/troubleshooting.md is not what it would write
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"
)

// Paths of the inputs and the output, relative to the repository root.
const (
	conditionsFile = "api/v1alpha1/conditions.go"
	catalogueFile  = "docs/troubleshooting/reasons.yaml"
	introFile      = "docs/troubleshooting/intro.md"
	exitCodesFile  = "contracts/exit-codes.json"
	outputFile     = "docs/troubleshooting.md"
	generateCmd    = "hack/troubleshooting.sh generate"
)

// sourceDirs hold the code whose event reasons must be in the catalogue (tests excluded).
var sourceDirs = []string{"controllers", "internal", "cmd"}

// pendingSource is a function whose returned messages say why a batch stays Pending: each must
// be described by a placement entry of the catalogue.
type pendingSource struct {
	File  string
	Funcs []string
}

// pendingSources are the functions placement's per-node and per-batch reasons come from. A
// renamed function fails the generator with its name: update this list.
var pendingSources = []pendingSource{
	{"internal/placement/placement.go", []string{"check", "checkLayers", "cacheReason", "noEngineReason", "gpuMemoryReason"}},
	{"internal/remoteseal/provider/lotushandoff.go", []string{"HandoffProblem"}},
}

// reasonArg is, for the calls that record an event or set a condition, the index of their
// reason argument (events.EventRecorder.Eventf, the lotus endpoints' event callback, the sealer
// reconciler's waitAttempt and setCondition).
var reasonArg = map[string]int{"Eventf": 3, "Event": 2, "event": 2, "waitAttempt": 3, "setCondition": 3}

// inputs are the files and directories one run reads; tests point some of them elsewhere.
type inputs struct {
	Root           string // the repository: links are resolved and paths shown from here
	Conditions     string
	Catalogue      string
	Intro          string
	ExitCodes      string
	Output         string
	SourceDirs     []string
	PendingSources []pendingSource // files relative to Root, or absolute
}

func defaultInputs(root string) inputs {
	in := inputs{
		Root:           root,
		Conditions:     filepath.Join(root, conditionsFile),
		Catalogue:      filepath.Join(root, catalogueFile),
		Intro:          filepath.Join(root, introFile),
		ExitCodes:      filepath.Join(root, exitCodesFile),
		Output:         filepath.Join(root, outputFile),
		PendingSources: pendingSources,
	}
	for _, d := range sourceDirs {
		in.SourceDirs = append(in.SourceDirs, filepath.Join(root, d))
	}
	return in
}

// rel shows a path relative to the repository root where it lies inside it.
func (in *inputs) rel(p string) string {
	if r, err := filepath.Rel(in.Root, p); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return p
}

func (in *inputs) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(in.Root, p)
}

func main() {
	check := flag.Bool("check", false, "fail when "+outputFile+" is not what this would write")
	root := flag.String("root", "", "the repository root (default: the directory above the working directory holding go.mod)")
	flag.Parse()
	r := *root
	if r == "" {
		var err error
		if r, err = findRoot(); err != nil {
			fmt.Fprintln(os.Stderr, "troubleshooting:", err)
			os.Exit(2)
		}
	}
	in := defaultInputs(r)
	out, err := generate(in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "troubleshooting: %s is not written:\n%v\n", outputFile, err)
		os.Exit(1)
	}
	if *check {
		if err := compare(in.Output, out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(in.Output, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "troubleshooting:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", outputFile)
}

// findRoot is the nearest directory at or above the working directory holding go.mod.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod at or above the working directory: pass -root")
		}
		dir = up
	}
}

// compare fails when the file at path does not hold want, saying how to refresh it.
func compare(path string, want []byte) error {
	have, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if bytes.Equal(have, want) {
		return nil
	}
	hl, wl := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	line := 0
	for line < len(hl) && line < len(wl) && hl[line] == wl[line] {
		line++
	}
	at := func(ls []string) string {
		if line < len(ls) {
			return ls[line]
		}
		return "(end of file)"
	}
	return fmt.Errorf("%s is stale: run %s (or go run ./hack/troubleshooting) and commit\nfirst difference at line %d:\n  file:  %s\n  wants: %s",
		outputFile, generateCmd, line+1, at(hl), at(wl))
}

// ---- the catalogue ----

type catalogue struct {
	Sections       []section            `json:"sections"`
	Reasons        map[string]entry     `json:"reasons"`
	NodeReasons    map[string]entry     `json:"nodeReasons"`
	Events         map[string]entry     `json:"events"`
	Placement      []fit                `json:"placement"`
	ExitCodes      map[string]exitEntry `json:"exitCodes"`
	FailureClasses []failureClass       `json:"failureClasses"`
}

// section is one part of the page, symptom first.
type section struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Intro string `json:"intro"`
	// Table: the section's reasons are rows of one table (normal progress), not subsections.
	Table bool `json:"table"`
	// The generated tables that close the section.
	Placement      bool `json:"placement"`
	ExitCodes      bool `json:"exitCodes"`
	FailureClasses bool `json:"failureClasses"`
}

// entry is what the catalogue says of one reason.
type entry struct {
	Section string `json:"section"`
	Kind    string `json:"kind"`
	Symptom string `json:"symptom"`
	Meaning string `json:"meaning"`
	Fix     string `json:"fix"`
	// Display replaces the key in the page (a pattern key such as "Phase*").
	Display string `json:"display"`
}

// fit is one reason a node does not fit a batch (or the batch waits whatever the nodes), as
// it appears in the Unschedulable message.
type fit struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	// Code is text of the message as the code writes it (a part of a string literal in File).
	Code    string `json:"code"`
	File    string `json:"file"`
	Waits   bool   `json:"waits"`
	Meaning string `json:"meaning"`
	Fix     string `json:"fix"`
}

type exitEntry struct {
	Reason string `json:"reason"`
	Fix    string `json:"fix"`
	// Name, Meaning and Operator describe a code that contracts/exit-codes.json does not list.
	Name     string `json:"name"`
	Meaning  string `json:"meaning"`
	Operator string `json:"operator"`
}

type failureClass struct {
	Class   string `json:"class"`
	Meaning string `json:"meaning"`
	Fix     string `json:"fix"`
}

// ---- the constants ----

// constant is one declaration of api/v1alpha1/conditions.go.
type constant struct {
	Name, Value, Doc string
	Used             bool // some code outside the API package names it
}

type constants struct {
	Reasons     []constant // SealBatch reasons: the Reason type, or named Reason*
	NodeReasons []constant // NodeReason*
	CondTypes   []constant // Cond*
}

func (c *constants) lookup(name string) (constant, string, bool) {
	for _, set := range []struct {
		kind string
		list []constant
	}{{"reason", c.Reasons}, {"nodeReason", c.NodeReasons}, {"cond", c.CondTypes}} {
		for _, k := range set.list {
			if k.Name == name {
				return k, set.kind, true
			}
		}
	}
	return constant{}, "", false
}

func (c *constants) markUsed(name string) {
	for _, list := range [][]constant{c.Reasons, c.NodeReasons, c.CondTypes} {
		for i := range list {
			if list[i].Name == name {
				list[i].Used = true
			}
		}
	}
}

var wordRE = regexp.MustCompile(`[A-Za-z0-9_]+`)

// readConstants parses the condition types and reasons with their doc comments. A comment that
// starts with a constant's name documents it and the undocumented constants after it that it
// names; one that does not (a group heading such as "Scrub events on the SealerNode.")
// documents every undocumented constant up to the next comment.
func readConstants(path string) (*constants, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := &constants{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		carry, heading := "", false
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			typed := false
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Reason" {
				typed = true
			}
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, err
				}
				doc := ""
				if vs.Doc != nil {
					carry = oneLine(vs.Doc.Text())
					first := wordRE.FindString(carry)
					heading = first != name.Name
					doc = carry
				} else if carry != "" && (heading || slices.Contains(wordRE.FindAllString(carry, -1), name.Name)) {
					doc = carry
				}
				if vs.Comment != nil {
					doc = strings.TrimSpace(doc + " " + oneLine(vs.Comment.Text()))
				}
				k := constant{Name: name.Name, Value: value, Doc: doc}
				switch {
				case strings.HasPrefix(name.Name, "NodeReason"):
					out.NodeReasons = append(out.NodeReasons, k)
				case typed || strings.HasPrefix(name.Name, "Reason"):
					out.Reasons = append(out.Reasons, k)
				case strings.HasPrefix(name.Name, "Cond"):
					out.CondTypes = append(out.CondTypes, k)
				}
			}
		}
	}
	if len(out.Reasons) == 0 || len(out.NodeReasons) == 0 {
		return nil, fmt.Errorf("%s: no Reason or NodeReason constants found", path)
	}
	return out, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// namesPrefix is the "ReasonA and ReasonB: " a doc comment starts with.
var namesPrefix = regexp.MustCompile(`^(?:(?:Node)?Reason\w+|Cond\w+)(?:(?:, | and )(?:(?:Node)?Reason\w+|Cond\w+))*: `)

// stripNames drops the constant names a doc comment starts with (the page names them already).
func stripNames(doc string) string {
	return namesPrefix.ReplaceAllString(doc, "")
}

// ---- the code: event reasons, constant uses, placement messages ----

// eventUse is an event reason the code writes without a reason constant.
type eventUse struct {
	Files []string
	// Cond names the condition type constant used as the event reason ("" for a literal).
	Cond string
}

// scanCode records which constants the code outside the API package uses and returns the
// event reasons it writes as literals or condition types.
func scanCode(in *inputs, cs *constants) (map[string]*eventUse, error) {
	events := map[string]*eventUse{}
	note := func(reason, file, cond string) {
		u := events[reason]
		if u == nil {
			u = &eventUse{Cond: cond}
			events[reason] = u
		}
		if !slices.Contains(u.Files, file) {
			u.Files = append(u.Files, file)
		}
	}
	fset := token.NewFileSet()
	for _, dir := range in.SourceDirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			file := in.rel(p)
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if _, ok := x.X.(*ast.Ident); ok {
						if _, _, ok := cs.lookup(x.Sel.Name); ok {
							cs.markUsed(x.Sel.Name)
						}
					}
				case *ast.CallExpr:
					idx, ok := reasonArg[funcName(x.Fun)]
					if !ok || len(x.Args) <= idx {
						return true
					}
					switch r := reasonOf(x.Args[idx], cs); {
					case r.literal != "":
						note(r.literal, file, "")
					case r.cond != "":
						note(r.value, file, r.cond)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return events, nil
}

func funcName(e ast.Expr) string {
	switch f := e.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

type reasonExpr struct {
	literal     string // a string literal; "Phase*" for "Phase" + something
	cond, value string // a condition type constant used as the reason, and its value
}

// reasonOf reads a reason argument: a literal, a literal prefix, or string(Cond...). Reason
// constants need nothing here (they are marked used), variables cannot be read.
func reasonOf(e ast.Expr, cs *constants) reasonExpr {
	switch x := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING {
			return reasonExpr{literal: s}
		}
	case *ast.BinaryExpr:
		if l, ok := x.X.(*ast.BasicLit); ok && x.Op == token.ADD {
			if s, err := strconv.Unquote(l.Value); err == nil {
				return reasonExpr{literal: s + "*"}
			}
		}
	case *ast.CallExpr:
		if funcName(x.Fun) == "string" && len(x.Args) == 1 {
			return reasonOf(x.Args[0], cs)
		}
	case *ast.SelectorExpr:
		if k, kind, ok := cs.lookup(x.Sel.Name); ok && kind == "cond" {
			return reasonExpr{cond: k.Name, value: k.Value}
		}
	}
	return reasonExpr{}
}

// stringLiterals are every string literal of a Go file, unquoted.
func stringLiterals(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
			if s, err := strconv.Unquote(l.Value); err == nil {
				out = append(out, s)
			}
		}
		return true
	})
	return out, nil
}

// returnedMessages are the message texts the named functions of a file return first: a
// literal, the format of fmt.Sprintf, or the literal parts of a concatenation.
func returnedMessages(path string, funcs []string) (map[string][]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !slices.Contains(funcs, fd.Name.Name) || fd.Body == nil {
			continue
		}
		out[fd.Name.Name] = []string{}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			r, ok := n.(*ast.ReturnStmt)
			if !ok || len(r.Results) == 0 {
				return true
			}
			if s := messageOf(r.Results[0]); s != "" {
				out[fd.Name.Name] = append(out[fd.Name.Name], s)
			}
			return true
		})
	}
	for _, name := range funcs {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("%s has no function %s: update pendingSources in hack/troubleshooting/main.go", path, name)
		}
	}
	return out, nil
}

func messageOf(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING {
			return s
		}
	case *ast.CallExpr:
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sprintf" && len(x.Args) > 0 {
			return messageOf(x.Args[0])
		}
	case *ast.BinaryExpr:
		if x.Op == token.ADD { // the literal parts of a concatenation, a variable part left out
			return messageOf(x.X) + messageOf(x.Y)
		}
	}
	return ""
}

// ---- generate ----

// generate reads the inputs and renders the page; every problem found is in the error.
func generate(in inputs) ([]byte, error) {
	cs, err := readConstants(in.Conditions)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(in.Catalogue)
	if err != nil {
		return nil, err
	}
	var cat catalogue
	if err := yaml.UnmarshalStrict(raw, &cat); err != nil {
		return nil, fmt.Errorf("%s: %w", in.rel(in.Catalogue), err)
	}
	intro, err := os.ReadFile(in.Intro)
	if err != nil {
		return nil, err
	}
	contract, err := readExitCodes(in.ExitCodes)
	if err != nil {
		return nil, err
	}
	events, err := scanCode(&in, cs)
	if err != nil {
		return nil, err
	}
	p := &page{in: &in, cs: cs, cat: &cat, events: events, contract: contract}
	var errs []error
	errs = append(errs, p.checkCatalogue()...)
	errs = append(errs, p.checkPlacement()...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := p.render(string(intro))
	if errs := checkLinks(&in, out); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

type exitCode struct {
	Code     int    `json:"code"`
	Name     string `json:"name"`
	Meaning  string `json:"meaning"`
	Operator string `json:"operator"`
}

func readExitCodes(path string) ([]exitCode, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Codes []exitCode `json:"codes"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc.Codes, nil
}

type page struct {
	in       *inputs
	cs       *constants
	cat      *catalogue
	events   map[string]*eventUse
	contract []exitCode
}

// distinct are the values of a list of constants, in declaration order, each with the names
// declaring it.
func distinct(list []constant) ([]string, map[string][]constant) {
	var order []string
	by := map[string][]constant{}
	for _, k := range list {
		if _, ok := by[k.Value]; !ok {
			order = append(order, k.Value)
		}
		by[k.Value] = append(by[k.Value], k)
	}
	return order, by
}

// eventKeys are the event reasons the catalogue must describe: those the code writes that are
// no reason constant's value.
func (p *page) eventKeys() []string {
	var out []string
	for r := range p.events {
		if !p.isReasonValue(r) {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

func (p *page) isReasonValue(v string) bool {
	for _, k := range p.cs.Reasons {
		if k.Value == v {
			return true
		}
	}
	for _, k := range p.cs.NodeReasons {
		if k.Value == v {
			return true
		}
	}
	return false
}

func (p *page) checkCatalogue() []error {
	var errs []error
	cat := p.in.rel(p.in.Catalogue)
	cond := p.in.rel(p.in.Conditions)
	sections := map[string]section{}
	for _, s := range p.cat.Sections {
		if _, dup := sections[s.ID]; dup || s.ID == "" || s.Title == "" {
			errs = append(errs, fmt.Errorf("%s: section %q: give each section a unique id and a title", cat, s.ID))
		}
		sections[s.ID] = s
	}
	checkEntry := func(list, key string, e entry) {
		s, ok := sections[e.Section]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: %s: %q: section %q is not one of sections", cat, list, key, e.Section))
		case e.Kind == "" || e.Meaning == "":
			errs = append(errs, fmt.Errorf("%s: %s: %q needs kind and meaning", cat, list, key))
		case !s.Table && (e.Symptom == "" || e.Fix == ""):
			errs = append(errs, fmt.Errorf("%s: %s: %q is in section %q, whose entries need symptom and fix too", cat, list, key, e.Section))
		}
	}
	for _, set := range []struct {
		list   string
		consts []constant
		cat    map[string]entry
	}{{"reasons", p.cs.Reasons, p.cat.Reasons}, {"nodeReasons", p.cs.NodeReasons, p.cat.NodeReasons}} {
		values, by := distinct(set.consts)
		for _, v := range values {
			e, ok := set.cat[v]
			if !ok {
				errs = append(errs, fmt.Errorf("reason %q (%s in %s) has no entry under %s: in %s: add one (section, kind, symptom, meaning, fix)",
					v, names(by[v]), cond, set.list, cat))
				continue
			}
			checkEntry(set.list, v, e)
		}
		for _, k := range sortedKeys(set.cat) {
			if _, ok := by[k]; !ok {
				errs = append(errs, fmt.Errorf("%s: %s: %q is the value of no constant in %s: remove the entry or correct its key", cat, set.list, k, cond))
			}
		}
	}
	for _, k := range p.eventKeys() {
		e, ok := p.cat.Events[k]
		if !ok {
			errs = append(errs, fmt.Errorf("event reason %q (written in %s) has no entry under events: in %s: add one, or declare it as a Reason constant in %s",
				k, strings.Join(p.events[k].Files, ", "), cat, cond))
			continue
		}
		checkEntry("events", k, e)
	}
	for _, k := range sortedKeys(p.cat.Events) {
		if u, ok := p.events[k]; !ok || p.isReasonValue(k) {
			why := "no code writes it"
			if ok && u != nil {
				why = "it is a reason constant's value: describe it under reasons: or nodeReasons:"
			}
			errs = append(errs, fmt.Errorf("%s: events: %q: %s: remove the entry or correct its key", cat, k, why))
		}
	}
	// Exit codes: every code of the contract, and what extra codes the catalogue names.
	inContract := map[string]bool{}
	for _, c := range p.contract {
		key := strconv.Itoa(c.Code)
		inContract[key] = true
		if _, ok := p.cat.ExitCodes[key]; !ok {
			errs = append(errs, fmt.Errorf("exit code %d (%s in %s) has no entry under exitCodes: in %s", c.Code, c.Name, p.in.rel(p.in.ExitCodes), cat))
		}
	}
	for _, key := range sortedKeys(p.cat.ExitCodes) {
		x := p.cat.ExitCodes[key]
		if _, err := strconv.Atoi(key); err != nil {
			errs = append(errs, fmt.Errorf("%s: exitCodes: %q is not a number", cat, key))
		}
		if !inContract[key] && (x.Name == "" || x.Meaning == "" || x.Operator == "") {
			errs = append(errs, fmt.Errorf("%s: exitCodes: %s is not in %s: give it name, meaning and operator", cat, key, p.in.rel(p.in.ExitCodes)))
		}
		if x.Reason != "" && !slices.ContainsFunc(p.cs.Reasons, func(k constant) bool { return k.Value == x.Reason }) {
			errs = append(errs, fmt.Errorf("%s: exitCodes: %s: reason %q is the value of no Reason constant in %s", cat, key, x.Reason, cond))
		}
	}
	ids := map[string]bool{}
	for _, f := range p.cat.Placement {
		if f.ID == "" || ids[f.ID] || f.Message == "" || f.Code == "" || f.Meaning == "" || f.Fix == "" {
			errs = append(errs, fmt.Errorf("%s: placement: %q: each entry needs a unique id, message, code, meaning and fix", cat, f.ID))
		}
		ids[f.ID] = true
	}
	return errs
}

func names(list []constant) string {
	var out []string
	for _, k := range list {
		out = append(out, k.Name)
	}
	return strings.Join(out, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkPlacement holds the placement table to the code: each entry's text is in its file, and
// each message the pending sources return is described by an entry.
func (p *page) checkPlacement() []error {
	var errs []error
	cat := p.in.rel(p.in.Catalogue)
	literals := map[string][]string{}
	fileOf := func(f fit) string {
		if f.File == "" {
			return p.in.abs(pendingSources[0].File)
		}
		return p.in.abs(f.File)
	}
	for _, f := range p.cat.Placement {
		path := fileOf(f)
		if _, ok := literals[path]; !ok {
			lits, err := stringLiterals(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: placement: %q: %w", cat, f.ID, err))
				literals[path] = nil
				continue
			}
			literals[path] = lits
		}
		if !slices.ContainsFunc(literals[path], func(s string) bool { return strings.Contains(s, f.Code) }) {
			errs = append(errs, fmt.Errorf("%s: placement: %q: the code %q is in no string of %s: the message changed or went; update or remove the entry",
				cat, f.ID, f.Code, p.in.rel(path)))
		}
	}
	for _, src := range p.in.PendingSources {
		path := p.in.abs(src.File)
		msgs, err := returnedMessages(path, src.Funcs)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, fn := range src.Funcs {
			for _, m := range msgs[fn] {
				covered := slices.ContainsFunc(p.cat.Placement, func(f fit) bool {
					return fileOf(f) == path && strings.Contains(m, f.Code)
				})
				if !covered {
					errs = append(errs, fmt.Errorf("%s: %s returns %q, which no placement: entry in %s describes: add one whose code is a part of that text",
						p.in.rel(path), fn, m, cat))
				}
			}
		}
	}
	return errs
}

// ---- render ----

// anchor is the id of a reason's entry: its value in lower case (letters and digits), with
// "sealernode-" before a SealerNode reason.
func anchor(node bool, key string) string {
	var b strings.Builder
	if node {
		b.WriteString("sealernode-")
	}
	for _, r := range strings.ToLower(key) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// item is one entry as the page shows it.
type item struct {
	key, anchor, display string
	node                 bool
	e                    entry
	code                 string // what the code declares it as
}

func (p *page) items() []item {
	var out []item
	condRef := "[" + conditionsFile + "](../" + conditionsFile + ")"
	for _, set := range []struct {
		node   bool
		consts []constant
		cat    map[string]entry
	}{{false, p.cs.Reasons, p.cat.Reasons}, {true, p.cs.NodeReasons, p.cat.NodeReasons}} {
		values, by := distinct(set.consts)
		for _, v := range values {
			var code []string
			used := false
			for _, k := range by[v] {
				c := "`" + k.Name + "` in " + condRef
				if doc := stripNames(k.Doc); doc != "" {
					c += ": " + strings.TrimSuffix(doc, ".")
				}
				code = append(code, c)
				used = used || k.Used
			}
			c := strings.Join(code, "; ") + "."
			if !used {
				c += " **No code outside the API package uses this constant at present.**"
			}
			out = append(out, item{key: v, anchor: anchor(set.node, v), display: v, node: set.node, e: set.cat[v], code: c})
		}
	}
	for _, k := range p.eventKeys() {
		e := p.cat.Events[k]
		c := "an event reason written as a string literal; no constant in " + condRef + " declares it."
		if u := p.events[k]; u.Cond != "" {
			c = "the condition type `" + u.Cond + "` used as the event reason (" + condRef + ")."
		}
		d := k
		if e.Display != "" {
			d = e.Display
		}
		out = append(out, item{key: k, anchor: anchor(false, k), display: d, e: e, code: c})
	}
	return out
}

func (p *page) render(intro string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- Generated by %s (go run ./hack/troubleshooting) from %s, the event reasons in the code and %s: edit those, not this file. -->\n",
		generateCmd, conditionsFile, catalogueFile)
	b.WriteString(strings.TrimRight(intro, "\n") + "\n\n")
	items := p.items()
	bySection := map[string][]item{}
	for _, it := range items {
		bySection[it.e.Section] = append(bySection[it.e.Section], it)
	}

	// Contents: each section with its reasons.
	b.WriteString("## Contents\n\n")
	for _, s := range p.cat.Sections {
		var links []string
		for _, it := range bySection[s.ID] {
			links = append(links, fmt.Sprintf("[%s](#%s)", it.display, it.anchor))
		}
		fmt.Fprintf(&b, "- [%s](#%s)", s.Title, slug(s.Title))
		if len(links) > 0 {
			b.WriteString(": " + strings.Join(links, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")

	for _, s := range p.cat.Sections {
		fmt.Fprintf(&b, "## %s\n\n", s.Title)
		if s.Intro != "" {
			b.WriteString(strings.TrimSpace(s.Intro) + "\n\n")
		}
		if s.Table {
			b.WriteString("| reason | where | meaning | what to do |\n|---|---|---|---|\n")
			for _, it := range bySection[s.ID] {
				fix := it.e.Fix
				if fix == "" {
					fix = "Nothing."
				}
				fmt.Fprintf(&b, "| <a id=\"%s\"></a>%s | %s | %s | %s |\n", it.anchor, codeList(it.display), cell(it.e.Kind), cell(it.e.Meaning), cell(fix))
			}
			b.WriteString("\n")
		} else {
			for _, it := range bySection[s.ID] {
				p.renderItem(&b, it)
			}
		}
		if s.Placement {
			p.renderPlacement(&b)
		}
		if s.ExitCodes {
			p.renderExitCodes(&b)
		}
		if s.FailureClasses {
			p.renderFailureClasses(&b)
		}
	}
	return []byte(strings.TrimRight(b.String(), "\n") + "\n")
}

// codeList shows "A, B" as "`A`, `B`".
func codeList(s string) string {
	parts := strings.Split(s, ", ")
	for i := range parts {
		parts[i] = "`" + parts[i] + "`"
	}
	return strings.Join(parts, ", ")
}

func (p *page) renderItem(b *strings.Builder, it item) {
	if it.node {
		fmt.Fprintf(b, "### SealerNode: `%s`\n\n", it.display)
	} else {
		fmt.Fprintf(b, "### `%s`\n\n", it.display)
	}
	field := func(label, text string) {
		lines := strings.Split(strings.TrimSpace(text), "\n")
		fmt.Fprintf(b, "- **%s** %s\n", label, lines[0])
		for _, l := range lines[1:] {
			if strings.TrimSpace(l) == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("  " + l + "\n")
		}
	}
	field("Where:", it.e.Kind)
	field("You see:", it.e.Symptom)
	field("Meaning:", it.e.Meaning)
	field("Fix:", it.e.Fix)
	field("In the code:", it.code)
	b.WriteString("\n")
}

// cell is text for one table cell: one line, pipes escaped.
func cell(s string) string {
	return strings.ReplaceAll(oneLine(s), "|", `\|`)
}

func (p *page) renderPlacement(b *strings.Builder) {
	b.WriteString("### Why a node does not fit\n\n")
	b.WriteString("The `Unschedulable` message counts the nodes that failed each check, e.g. `0/7 nodes fit: 2 nodes: hugepages-1Gi 12/36 free, 36 needed; 1 node: cordoned`. ")
	b.WriteString("Each part is one of these (numbers, names and paths vary). *Waits* marks capacity that frees up by itself: such nodes are held for the batch, ahead of later and lower-priority ones. ")
	b.WriteString("The last rows are reasons that hold the batch whatever the nodes: the message is then that reason alone.\n\n")
	b.WriteString("| the message reads | waits | meaning | what to do |\n|---|---|---|---|\n")
	for _, f := range p.cat.Placement {
		w := ""
		if f.Waits {
			w = "waits"
		}
		fmt.Fprintf(b, "| <a id=\"fit-%s\"></a>`%s` | %s | %s | %s |\n", f.ID, strings.ReplaceAll(oneLine(f.Message), "|", `\|`), w, cell(f.Meaning), cell(f.Fix))
	}
	b.WriteString("\n")
}

func (p *page) renderExitCodes(b *strings.Builder) {
	b.WriteString("### Sealer exit codes\n\n")
	fmt.Fprintf(b, "A failed sealer or C1 pod's message reads `sealer exited N (meaning): …`. The codes, from [%s](../%s) (the sealer and the operator both test against it):\n\n",
		exitCodesFile, exitCodesFile)
	b.WriteString("| exit | name | meaning | the operator | batch reason | what to do |\n|---|---|---|---|---|---|\n")
	seen := map[string]bool{}
	row := func(code, name, meaning, operator string) {
		x := p.cat.ExitCodes[code]
		reason := "—"
		if x.Reason != "" {
			reason = fmt.Sprintf("[`%s`](#%s)", x.Reason, anchor(false, x.Reason))
		}
		fix := x.Fix
		if fix == "" {
			fix = "—"
		}
		fmt.Fprintf(b, "| <a id=\"exit-%s\"></a>%s | `%s` | %s | %s | %s | %s |\n", code, code, name, cell(meaning), operatorAction(operator), reason, cell(fix))
		seen[code] = true
	}
	for _, c := range p.contract {
		row(strconv.Itoa(c.Code), c.Name, c.Meaning, c.Operator)
	}
	extra := sortedKeys(p.cat.ExitCodes)
	sort.SliceStable(extra, func(i, j int) bool { a, _ := strconv.Atoi(extra[i]); c, _ := strconv.Atoi(extra[j]); return a < c })
	for _, code := range extra {
		if !seen[code] {
			x := p.cat.ExitCodes[code]
			row(code, x.Name, x.Meaning+" (not in the table)", x.Operator)
		}
	}
	b.WriteString("\n")
}

// operatorAction says in words what the operator does on an exit (the table's operator field).
func operatorAction(op string) string {
	switch op {
	case "complete":
		return "reads the results"
	case "retry":
		return "retries (`spec.maxRetries`), then fails the batch"
	case "fail":
		return "fails the batch at once"
	case "rebuild-cache":
		return "has the node's parent cache rebuilt, then retries"
	}
	return "`" + op + "`"
}

func (p *page) renderFailureClasses(b *strings.Builder) {
	b.WriteString("### Failure classes\n\n")
	b.WriteString("Each left-out sector has a class: the `failure_class` of the sealer's results, in `kubectl sealfleet batch` next to the sector's reason, and the `reason` label of `sealfleet_sector_failures_total`.\n\n")
	b.WriteString("| class | meaning | what to do |\n|---|---|---|\n")
	for _, c := range p.cat.FailureClasses {
		fmt.Fprintf(b, "| <a id=\"class-%s\"></a>`%s` | %s | %s |\n", c.Class, c.Class, cell(c.Meaning), cell(c.Fix))
	}
	b.WriteString("\n")
}

// ---- links ----

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	explicitA = regexp.MustCompile(`<a id="([^"]+)"></a>`)
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// slug is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// anchors are the ids a Markdown text offers: its headings' (numbered when repeated, as GitHub
// does) and its explicit <a id> anchors. dups lists ids given twice.
func anchors(text string) (ids map[string]bool, dups []string) {
	ids = map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			s := slug(m[1])
			if n := seen[s]; n > 0 {
				seen[s]++
				s = fmt.Sprintf("%s-%d", s, n)
			} else {
				seen[s] = 1
			}
			ids[s] = true
		}
		for _, m := range explicitA.FindAllStringSubmatch(line, -1) {
			if ids[m[1]] {
				dups = append(dups, m[1])
			}
			ids[m[1]] = true
		}
	}
	return ids, dups
}

// checkLinks fails on relative links of the page to files, headings or anchors that do not
// exist, and on anchors the page gives twice.
func checkLinks(in *inputs, page []byte) []error {
	var errs []error
	own, dups := anchors(string(page))
	for _, d := range dups {
		errs = append(errs, fmt.Errorf("%s: anchor #%s is given twice (two entries with the same key?)", outputFile, d))
	}
	base := filepath.Dir(in.Output)
	cache := map[string]map[string]bool{}
	src := in.rel(in.Catalogue) + " or " + in.rel(in.Intro)
	for _, m := range linkRE.FindAllStringSubmatch(string(page), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, frag, _ := strings.Cut(target, "#")
		if file == "" {
			if !own[frag] {
				errs = append(errs, fmt.Errorf("%s: link %q: the page has no anchor #%s", src, target, frag))
			}
			continue
		}
		path := filepath.Join(base, filepath.FromSlash(file))
		if _, err := os.Stat(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: link %q: %s does not exist", src, target, in.rel(path)))
			continue
		}
		if frag == "" || !strings.HasSuffix(file, ".md") {
			continue
		}
		ids, ok := cache[path]
		if !ok {
			raw, err := os.ReadFile(path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ids, _ = anchors(string(raw))
			cache[path] = ids
		}
		if !ids[frag] {
			errs = append(errs, fmt.Errorf("%s: link %q: %s has no heading #%s", src, target, in.rel(path), frag))
		}
	}
	return errs
}
