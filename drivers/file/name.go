package file

import (
	"crypto/sha256"
	"encoding/hex"
)

// maxStem is the longest readable part of a lock file name, in bytes.
const maxStem = 60

// fileName maps a lock key to the name of its lock file: a readable stem
// (the key's ASCII letters, digits, '-' and '_', every other byte replaced by
// '_', as is a leading '-'; at most 60 bytes), '-', the hex SHA-256 of the
// whole key and ".lock". The name never contains '/', NUL, a leading dot or
// dash, is at most 130 bytes
// long, and two different keys (including keys differing only in case, on a
// case-insensitive file system) get different names because the hash is
// lower-case hex of the exact bytes.
func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	n := min(len(key), maxStem)
	if n == 0 {
		n = 1 // "_" for the empty key
	}
	buf := make([]byte, 0, n+1+2*len(sum)+len(".lock"))
	for i := 0; i < len(key) && i < maxStem; i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-' && i > 0:
			buf = append(buf, c)
		default:
			buf = append(buf, '_')
		}
	}
	if len(key) == 0 {
		buf = append(buf, '_')
	}
	buf = append(buf, '-')
	buf = hex.AppendEncode(buf, sum[:])
	buf = append(buf, ".lock"...)
	return string(buf)
}
