package mysql

import (
	"strings"
)

// Who holds an advisory lock another process took: the counter fence's
// row of the key (fence counter) also keeps, written by the acquire
// statement that takes the lock (no round trip or write of its own), the
// identity of the holder's token (identity), the id of the connection
// that took it and the server's clock then. Inspect reads IS_USED_LOCK,
// the server's boot time and the row in one statement (holderSQL), and
// shows the identity only when the row names the connection holding the
// lock and was written after the server's boot (bootSlack): ids start
// again from 1 after a restart. A lock taken without writing the row (a
// driver of an earlier version, a GET_LOCK by hand) is shown held by an
// unknown holder, since the row then names another connection; so is one
// whose statement has taken it and not yet written the row.
//
// The sequence and uuid_short fences keep no row per key: their locks
// are shown held by an unknown holder, as are all locks when the boot
// time cannot be read.

// holderColumns are the counter table's holder columns, added by ALTER
// TABLE to counter tables created by earlier versions.
var holderColumns = []column{
	{"holder", "holder VARBINARY(255) NOT NULL DEFAULT ''"},
	{"conn_id", "conn_id BIGINT UNSIGNED NOT NULL DEFAULT 0"},
	{"taken_at", "taken_at BIGINT NOT NULL DEFAULT 0"},
}

// holderSQL reads IS_USED_LOCK of the name (the second parameter), the
// boot time (%[2]s) and the identity that the counter table %[1]s keeps
// for the key's hash (the first parameter) when it names that holder and
// was written more than %[3]d s (bootSlack) after the boot.
const holderSQL = `SELECT u.id, u.boot, (SELECT f.holder FROM %[1]s AS f WHERE f.name_hash = ? AND f.conn_id = u.id
 AND f.taken_at > u.boot + %[3]d) FROM (SELECT IS_USED_LOCK(?) AS id, %[2]s AS boot) AS u`

// identity is the part of a token that names its holder
// (drivers.LockInfo.Holder): from its first '~' to its last, exclusive
// ("~app~host~pid" of a component.Mutex's token); "" when it names none.
func identity(token string) string {
	i, j := strings.IndexByte(token, '~'), strings.LastIndexByte(token, '~')
	if i < 0 || j <= i {
		return ""
	}
	return token[i:j]
}
