package postgres

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The SQL both drivers build from validated, quoted identifiers. Lock
// names, tokens and durations are always parameters.

// sessionSetup pins, on the connections the driver opens for itself (its
// advisory sessions and its LISTEN connection), the settings that their
// locks depend on, over whatever the server, the database or the role
// sets (a pooled table-mode connection is left alone: its session may be
// shared through a pooler):
//
//   - statement_timeout 0: a wait in the server (pg_advisory_lock with
//     lock_timeout) ends at its own bound, not at a shorter global one
//     that would fail the Acquire; the driver bounds its statements with
//     their ctx (the server is asked to cancel) and StallTimeout.
//   - idle_session_timeout and idle_in_transaction_session_timeout 0: an
//     advisory session is idle between renewals while it holds its locks;
//     the server must not end it (freeing them under a live holder).
//   - TCP keepalives (10 s idle, then every 5 s, 3 probes) and
//     tcp_user_timeout (30 s): a holder whose host vanished (power loss,
//     partition) loses its locks in the server within about half a
//     minute, not after the operating system's two hours.
//
// A setting the server does not know (idle_session_timeout before
// PostgreSQL 14, tcp_user_timeout before 12) is skipped.
const sessionSetup = "SELECT count(set_config(name, value, false)) FROM (VALUES " +
	"('statement_timeout', '0'), ('idle_session_timeout', '0'), ('idle_in_transaction_session_timeout', '0'), " +
	"('tcp_keepalives_idle', '10'), ('tcp_keepalives_interval', '5'), ('tcp_keepalives_count', '3'), " +
	"('tcp_user_timeout', '30000')) AS v(name, value) WHERE name IN (SELECT name FROM pg_settings)"

// serverTimeSQL reads the server's wall clock now (clock_timestamp, not the
// transaction's start as now() would), the clock the locks' expiries use.
const serverTimeSQL = "SELECT clock_timestamp()"

// nextvalSQL takes the next fence of n's sequence.
func nextvalSQL(n names) string {
	return fmt.Sprintf("nextval('%s')", strings.ReplaceAll(n.sequence, "'", "''")) // (never holds a ': validated)
}

// maxPayload is the longest key sent as a NOTIFY payload (PostgreSQL refuses
// 8000 bytes and more); longer keys are released without a wake-up.
const maxPayload = 7999

// payload is the NOTIFY payload for key: the key, or "" (no wake-up) when
// it is too long.
func payload(key string) string {
	if len(key) > maxPayload || !isText(key) {
		return ""
	}
	return key
}

// isText reports whether key can be sent as PostgreSQL text: valid UTF-8
// without NUL. Keys are any bytes; one that is not text goes unnotified
// (its waiters poll) and is shown in the table's name column by shownName.
func isText(key string) bool {
	return utf8.ValidString(key) && strings.IndexByte(key, 0) < 0
}
