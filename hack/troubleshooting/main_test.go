package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoInputs are the real inputs, from the repository this test runs in.
func repoInputs(t *testing.T) inputs {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return defaultInputs(root)
}

// writeCopy writes text into a file of a fresh temporary directory and returns its path.
func writeCopy(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// generateErr runs the generator and returns its error text, failing when there is none.
func generateErr(t *testing.T, in inputs) string {
	t.Helper()
	_, err := generate(in)
	if err == nil {
		t.Fatal("generate succeeded; want an error")
	}
	t.Log(err)
	return err.Error()
}

func wantAll(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("error does not say %q:\n%s", w, got)
		}
	}
}

// The page in the repository is what the generator writes: a reason added to the code, or an
// edit of the catalogue, fails here until the page is generated again (make test-go runs this).
func TestPageIsCurrent(t *testing.T) {
	in := repoInputs(t)
	out, err := generate(in)
	if err != nil {
		t.Fatalf("the catalogue does not match the code:\n%v", err)
	}
	if err := compare(in.Output, out); err != nil {
		t.Fatal(err)
	}
}

// Every reason constant has an entry whose anchor is its value in lower case (SealerNode ones
// with "sealernode-" before it), so other pages and alerts can link to it.
func TestEveryConstantHasItsAnchor(t *testing.T) {
	in := repoInputs(t)
	out, err := generate(in)
	if err != nil {
		t.Fatal(err)
	}
	ids, dups := anchors(string(out))
	if len(dups) > 0 {
		t.Errorf("anchors given twice: %v", dups)
	}
	cs, err := readConstants(in.Conditions)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range cs.Reasons {
		if a := strings.ToLower(k.Value); !ids[a] {
			t.Errorf("%s (%q): no anchor #%s", k.Name, k.Value, a)
		}
	}
	for _, k := range cs.NodeReasons {
		if a := "sealernode-" + strings.ToLower(k.Value); !ids[a] {
			t.Errorf("%s (%q): no anchor #%s", k.Name, k.Value, a)
		}
	}
	// Spot checks of what the generator must have read from the code.
	for _, id := range []string{"unschedulable", "audit", "sealernode-invalidspec", "invalidspec",
		"waitingforuncordon", "podcreationrefused", "phase", "exit-7", "fit-no-free-slot"} {
		if !ids[id] {
			t.Errorf("no anchor #%s", id)
		}
	}
}

// A reason constant without a catalogue entry fails the generator, naming the reason, its
// constant and the file to edit.
func TestMissingEntryIsReported(t *testing.T) {
	in := repoInputs(t)
	src := read(t, in.Conditions) + "\nconst ReasonBrandNew Reason = \"BrandNewReason\"\n\nconst NodeReasonBrandNew = \"BrandNewNodeReason\"\n"
	in.Conditions = writeCopy(t, "conditions.go", src)
	got := generateErr(t, in)
	wantAll(t, got, `"BrandNewReason"`, "ReasonBrandNew", `"BrandNewNodeReason"`, "NodeReasonBrandNew",
		"docs/troubleshooting/reasons.yaml", "under reasons:", "under nodeReasons:")
}

// A catalogue entry that no constant has fails the generator too.
func TestUnknownEntryIsReported(t *testing.T) {
	in := repoInputs(t)
	cat := read(t, in.Catalogue)
	extra := "reasons:\n  GoneReason:\n    section: failed\n    kind: k\n    symptom: s\n    meaning: m\n    fix: f\n\n"
	if !strings.Contains(cat, "\nreasons:\n") {
		t.Fatal("the catalogue has no top-level reasons:")
	}
	in.Catalogue = writeCopy(t, "reasons.yaml", strings.Replace(cat, "\nreasons:\n", "\n"+extra, 1))
	got := generateErr(t, in)
	wantAll(t, got, `"GoneReason"`, "no constant", "api/v1alpha1/conditions.go")
}

// An event reason written as a literal, with no constant and no catalogue entry, fails the
// generator with the file that writes it.
func TestUndescribedEventIsReported(t *testing.T) {
	in := repoInputs(t)
	dir := t.TempDir()
	src := `package x

func f(r recorder) {
	r.Eventf(nil, nil, "Warning", "SomethingNew", "Seal", "%s", "x")
}
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	in.SourceDirs = append(in.SourceDirs, dir)
	got := generateErr(t, in)
	wantAll(t, got, `"SomethingNew"`, "x.go", "under events:")
}

// A placement message without an entry, or an entry whose text the code no longer has, fails
// the generator.
func TestPlacementDriftIsReported(t *testing.T) {
	in := repoInputs(t)
	src := `package placement

func check() (string, bool) {
	return "a reason nobody described", false
}
`
	p := writeCopy(t, "placement.go", src)
	in.PendingSources = []pendingSource{{File: p, Funcs: []string{"check"}}}
	got := generateErr(t, in)
	wantAll(t, got, `returns "a reason nobody described"`, "no placement: entry")

	in = repoInputs(t)
	cat := strings.Replace(read(t, in.Catalogue), "code: PC1 pipelines busy", "code: PC1 pipelines congested", 1)
	in.Catalogue = writeCopy(t, "reasons.yaml", cat)
	got = generateErr(t, in)
	wantAll(t, got, `"pipelines"`, `"PC1 pipelines congested" is in no string`)
}

// A link to a heading that does not exist fails the generator.
func TestBrokenLinkIsReported(t *testing.T) {
	in := repoInputs(t)
	in.Intro = writeCopy(t, "intro.md", read(t, in.Intro)+"\nSee [nowhere](operations.md#no-such-heading) and [self](#no-such-anchor).\n")
	got := generateErr(t, in)
	wantAll(t, got, "operations.md has no heading #no-such-heading", "the page has no anchor #no-such-anchor")
}

// The check mode says how to refresh a stale page.
func TestCompareSaysHowToRefresh(t *testing.T) {
	p := writeCopy(t, "troubleshooting.md", "old\n")
	err := compare(p, []byte("new\n"))
	if err == nil {
		t.Fatal("compare accepted a stale page")
	}
	wantAll(t, err.Error(), "docs/troubleshooting.md is stale: run hack/troubleshooting.sh generate", "line 1")
	if err := compare(p, []byte("old\n")); err != nil {
		t.Fatal(err)
	}
}

func TestSlugIsGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Node preparation (only on explicit intent)":     "node-preparation-only-on-explicit-intent",
		"Nodes: parent caches, hugepages, CPU manager":   "nodes-parent-caches-hugepages-cpu-manager",
		"SealerNode: `NoSHANI`":                          "sealernode-noshani",
		"`kubectl sealfleet`":                            "kubectl-sealfleet",
		"The kubelet's CPU manager":                      "the-kubelets-cpu-manager",
		"Sectors left out (SectorsFailed, SeedsMissing)": "sectors-left-out-sectorsfailed-seedsmissing",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// Doc comments reach the constants they document: their own, the ones they name, and a group
// heading's.
func TestDocComments(t *testing.T) {
	src := `package v1alpha1

type Reason string

// Reasons.
const (
	ReasonA Reason = "A"
	// ReasonB and ReasonC: both documented here.
	ReasonB Reason = "B"
	ReasonC Reason = "C"
	ReasonD Reason = "D"
	// A group heading.
	ReasonE Reason = "E"
	ReasonF Reason = "F" // and a line comment
)
`
	cs, err := readConstants(writeCopy(t, "conditions.go", src+"\nconst NodeReasonX = \"X\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "", "B": "ReasonB and ReasonC: both documented here.", "C": "ReasonB and ReasonC: both documented here.",
		"D": "", "E": "A group heading.", "F": "A group heading. and a line comment"}
	for _, k := range cs.Reasons {
		if k.Doc != want[k.Value] {
			t.Errorf("%s: doc %q, want %q", k.Name, k.Doc, want[k.Value])
		}
	}
	if got := stripNames("ReasonB and ReasonC: both documented here."); got != "both documented here." {
		t.Errorf("stripNames: %q", got)
	}
}
