package redis

import "testing"

// TestScriptDigests: every script has its own digest, the one EVALSHA sends.
func TestScriptDigests(t *testing.T) {
	ds := ScriptDigests()
	seen := map[string]string{}
	for name, sha := range ds {
		if len(sha) != 40 {
			t.Errorf("%s: digest %q, want 40 hex digits", name, sha)
		}
		if other, ok := seen[sha]; ok {
			t.Errorf("%s and %s share digest %s", name, other, sha)
		}
		seen[sha] = name
	}
	if ds["acquire"] != acquireScript.Hash() || ds["release"] != releaseScript.Hash() {
		t.Errorf("digests %v do not match the scripts run", ds)
	}
}
