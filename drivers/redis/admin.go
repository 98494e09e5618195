package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Lister = (*Driver)(nil)

// unescaper reverses escaper.
var unescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

// globEscaper escapes the characters special in a SCAN MATCH pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// List returns the locks whose keys start with prefix: it SCANs the lock
// keys (on every master of a Cluster) and inspects each.
func (d *Driver) List(ctx context.Context, prefix string) ([]drivers.ListedLock, error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	match := "{" + globEscaper.Replace(escaper.Replace(prefix)) + "*}"
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *goredis.Client) error {
		it := c.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			keys = append(keys, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	switch c := d.client.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *goredis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("client %T cannot scan", d.client)
	}
	if err != nil {
		return nil, fmt.Errorf("redis: list: %w", err)
	}
	var out []drivers.ListedLock
	for _, k := range keys {
		key, ok := lockKeyName(k)
		if !ok || !strings.HasPrefix(key, prefix) {
			continue
		}
		info, held, err := d.Inspect(ctx, key)
		if err != nil {
			return nil, err
		}
		if held {
			out = append(out, drivers.ListedLock{Key: key, LockInfo: info})
		}
	}
	return out, nil
}

// lockKeyName returns the lock key of a Redis lock key "{E}", or false for
// the lock's other keys (fence counter, queue).
func lockKeyName(redisKey string) (string, bool) {
	if len(redisKey) < 2 || redisKey[0] != '{' || redisKey[len(redisKey)-1] != '}' ||
		strings.ContainsAny(redisKey[1:len(redisKey)-1], "{}") {
		return "", false
	}
	e := redisKey[1 : len(redisKey)-1]
	if e == "%" {
		return "", true
	}
	return unescaper.Replace(e), true
}
