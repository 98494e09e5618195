package component

import (
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A lock's token tells who holds it. Every store already keeps the token of
// each held lock (Redis value, table row, lock file), and drivers treat it
// as opaque, so a token that names its holder makes every such store record
// the holder, with no change to the stores' layouts:
//
//	<26 random base32 characters>~<application>~<host>~<pid>~<ms>
//
// The random part (130 bits: 26 base32 characters from crypto/rand, as
// rand.Text makes them) is what makes the token unique; the rest is the
// application name, the host name, the process id and the Unix time in
// milliseconds (base 36) of the acquisition attempt. The names keep only
// letters, digits, '.', '_' and '-' (others become '_'), the application
// is cut to 32 bytes and the host to 64, so a token is at most 150 bytes
// (MySQL's token column holds 255). Nothing secret is in it.

const (
	identSep   = '~'
	randLen    = 26 // base32 characters, 130 random bits
	maxAppLen  = 32
	maxHostLen = 64

	// maxIdentLen bounds identSuffix: four separators, the application,
	// the host and a pid (at most 20 digits).
	maxIdentLen = 4 + maxAppLen + maxHostLen + 20
	// maxTimeLen is the base 36 digits of any positive int64 (36^13 > 2^63).
	maxTimeLen = 13
	// stackKeyLen is the longest key (prefix and name) keyToken builds
	// with its token on the stack.
	stackKeyLen = 64
	base36      = "0123456789abcdefghijklmnopqrstuvwxyz"
	b32Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" // RFC 4648's, as rand.Text's
)

// Holder says who holds a lock, as its token tells.
type Holder struct {
	// Application is the holder's Options.Application (by default the
	// binary's name).
	Application string `json:"application"`
	// Host is the holder's host name.
	Host string `json:"host"`
	// PID is the holder's process id.
	PID int `json:"pid"`
	// AcquiredAt is when the holder's acquisition attempt started, in its
	// clock (millisecond precision).
	AcquiredAt time.Time `json:"acquiredAt"`
}

// String returns "application@host:pid".
func (h Holder) String() string {
	return h.Application + "@" + h.Host + ":" + strconv.Itoa(h.PID)
}

// ParseHolder reads the holder identity from a lock's token. It reports
// false for tokens that carry none (empty, or made by something else than a
// Mutex of this version).
func ParseHolder(token string) (Holder, bool) {
	if len(token) <= randLen || token[randLen] != identSep {
		return Holder{}, false
	}
	f := strings.Split(token[randLen+1:], string(identSep))
	if len(f) != 4 {
		return Holder{}, false
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil {
		return Holder{}, false
	}
	ms, err := strconv.ParseInt(f[3], 36, 64)
	if err != nil {
		return Holder{}, false
	}
	return Holder{Application: f[0], Host: f[1], PID: pid, AcquiredAt: time.UnixMilli(ms)}, true
}

// parseIdentity reads the holder from the part of its token that names it
// ("~app~host~pid", as drivers.LockInfo.Holder gives it). AcquiredAt stays
// zero: the store did not tell it.
func parseIdentity(id string) (Holder, bool) {
	f := strings.Split(id, string(identSep))
	if len(f) != 4 || f[0] != "" {
		return Holder{}, false
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil {
		return Holder{}, false
	}
	return Holder{Application: f[1], Host: f[2], PID: pid}, true
}

// process is this process's host name and pid, read once.
var process = sync.OnceValues(func() (string, int) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host, os.Getpid()
})

// identSuffix returns "~app~host~pid~" for the application app (default:
// the binary's base name).
func identSuffix(app string) string {
	if app == "" {
		app = filepath.Base(os.Args[0])
	}
	host, pid := process()
	var b strings.Builder
	b.WriteByte(identSep)
	b.WriteString(clean(app, maxAppLen))
	b.WriteByte(identSep)
	b.WriteString(clean(host, maxHostLen))
	b.WriteByte(identSep)
	b.WriteString(strconv.Itoa(pid))
	b.WriteByte(identSep)
	return b.String()
}

// clean keeps letters, digits, '.', '_' and '-' of s (others become '_'),
// cut to n bytes.
func clean(s string, n int) string {
	if s == "" {
		return "_"
	}
	b := []byte(s[:min(len(s), n)])
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// newToken returns a fresh token naming this Mutex's process as holder, for
// an attempt started at now.
func (m *Mutex) newToken(now time.Time) string {
	_, token := m.keyToken("", "", now)
	return token
}

// keyToken returns the key prefix+name and a fresh token for an attempt
// started at now, as two parts of one string: built in a buffer on the
// stack (unless the key is long), it is the attempt's one allocation for
// both.
func (m *Mutex) keyToken(prefix, name string, now time.Time) (key, token string) {
	k := len(prefix) + len(name)
	var buf [stackKeyLen + randLen + maxIdentLen + maxTimeLen]byte
	b := buf[:0]
	if n := k + randLen + len(m.ident) + maxTimeLen; n > len(buf) {
		b = make([]byte, 0, n)
	}
	b = append(append(b, prefix...), name...)
	// The random part as crypto/rand.Text makes it: 26 random bytes, each
	// read as one base32 character (5 random bits: 256 is a multiple of 32).
	r := b[len(b) : len(b)+randLen]
	_, _ = rand.Read(r) // never fails (crypto/rand)
	base32Bytes(r)
	b = b[:len(b)+randLen]
	b = append(b, m.ident...)
	b = appendMillis(b, now.UnixMilli())
	s := string(b)
	return s[:k], s[k:]
}

// base32Bytes replaces each byte c of r by b32Alphabet[c%32], eight bytes
// at a time: c%32 is below 26 for 'A'..'Z' ('A'+c%32), else '2'..'7'
// (c%32+24). Adding 102 to a byte below 32 sets its top bit exactly when
// it is 26 or more, and no byte carries into the next.
func base32Bytes(r []byte) {
	const (
		ones  = 0x0101010101010101
		low5  = 0x1f * ones
		plus  = (0x80 - 26) * ones
		upper = 'A' * ones
		shift = 'A' - ('2' - 26) // from 'A'+v to '2'+v-26
	)
	for len(r) >= 8 {
		v := binary.LittleEndian.Uint64(r) & low5
		high := (v + plus) >> 7 & ones // 1 in the bytes of 26..31
		binary.LittleEndian.PutUint64(r, v+upper-high*shift)
		r = r[8:]
	}
	for i, c := range r {
		r[i] = b32Alphabet[c%32]
	}
}

// base36Pairs holds the two base 36 digits of each number below 36*36.
var base36Pairs = func() (t [2 * 36 * 36]byte) {
	for i := range 36 * 36 {
		t[2*i], t[2*i+1] = base36[i/36], base36[i%36]
	}
	return t
}()

// appendMillis appends ms in base 36, as strconv.AppendInt(dst, ms, 36)
// does (ParseHolder reads it back with strconv.ParseInt), two digits at a
// time and dividing by a constant (a multiplication) where strconv
// divides by a variable base, one digit at a time.
func appendMillis(dst []byte, ms int64) []byte {
	if ms < 0 {
		return strconv.AppendInt(dst, ms, 36)
	}
	var d [maxTimeLen]byte
	i := len(d)
	u := uint64(ms)
	for u >= 36*36 {
		q := u / (36 * 36)
		p := 2 * (u - q*36*36)
		i -= 2
		d[i], d[i+1] = base36Pairs[p], base36Pairs[p+1]
		u = q
	}
	if u >= 36 {
		i -= 2
		d[i], d[i+1] = base36Pairs[2*u], base36Pairs[2*u+1]
	} else {
		i--
		d[i] = base36[u]
	}
	return append(dst, d[i:]...)
}
