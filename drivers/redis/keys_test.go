package redis

import (
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	names := []string{
		"", "a", "orders:42", "{", "}", "}abc", "{a}", "a}b{c", "%", "%7D", "%7B", "%25",
		"{}", "}{", "x:fence", "{x}:fence", "quote'\"\\", "ünïcødé 🔒", strings.Repeat("k}", 5000),
	}
	seen := map[string]string{}
	for _, n := range names {
		lk, fk := lockKey(n), fenceKey(n)
		t.Run(strings.ToValidUTF8(n[:min(len(n), 16)], "?"), func(t *testing.T) {
			inner := lk[1 : len(lk)-1]
			if !strings.HasPrefix(lk, "{") || !strings.HasSuffix(lk, "}") || inner == "" || strings.ContainsAny(inner, "{}") {
				t.Fatalf("lock key %q is not one whole non-empty hash tag", lk)
			}
			if fk != lk+":fence" {
				t.Fatalf("fence key %q for lock key %q", fk, lk)
			}
			if slot(lk) != slot(fk) {
				t.Fatalf("lock and fence in slots %d and %d", slot(lk), slot(fk))
			}
			if slot(lk) != int(crc16(inner)%16384) {
				t.Fatalf("slot of %q is not the slot of its tag", lk)
			}
		})
		for _, k := range []string{lk, fk} {
			if prev, ok := seen[k]; ok {
				t.Fatalf("names %q and %q share the Redis key %q", prev, n, k)
			}
			seen[k] = n
		}
	}
}

// TestCRC16 checks the slot function against Redis Cluster's documented
// values (CLUSTER KEYSLOT; the cluster test checks more on a real server).
func TestCRC16(t *testing.T) {
	tests := []struct {
		key  string
		slot int
	}{
		{"123456789", 0x31C3 % 16384}, // the CRC16/XMODEM check value
		{"foo", 12182},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", slotOfWhole("foo{}{bar}")},
		{"foo{{bar}}zap", int(crc16("{bar") % 16384)},
	}
	for _, tt := range tests {
		if got := slot(tt.key); got != tt.slot {
			t.Errorf("slot(%q) = %d; want %d", tt.key, got, tt.slot)
		}
	}
}

func slotOfWhole(k string) int { return int(crc16(k) % 16384) }
