package contracts

import "testing"

func TestExitCodeTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range ExitCodes() {
		switch c.Operator {
		case "complete", "retry", "fail", "rebuild-cache":
		default:
			t.Errorf("exit %d: operator %q is not complete, retry, fail or rebuild-cache", c.Code, c.Operator)
		}
		if c.Name == "" || c.Meaning == "" || seen[c.Name] {
			t.Errorf("exit %d: name %q (unique) and meaning %q must be set", c.Code, c.Name, c.Meaning)
		}
		seen[c.Name] = true
	}
	if c, ok := Exit(0); !ok || c.Operator != "complete" {
		t.Errorf("exit 0: %+v", c)
	}
	if _, ok := Exit(137); ok {
		t.Error("137 (killed) is the kernel's, not the sealer's")
	}
}
