// Package dbconn is the database/sql part of a driver kit: a pool whose
// connections know their sockets (Sockets), a connection pinned with its
// socket whose statements end by cutting the socket (Pinned), statements
// kept prepared with each socket (Pinned.QueryUint) and a cache of pinned
// connections kept between uses (Keeper). What is a store's own (how its
// connector dials, what its server errors mean, what it keeps per
// connection) the driver passes in: it writes only its store's commands.
//
// Statements on pinned connections run with a context that cannot be
// cancelled, and the caller's ends by closing the socket: a database/sql
// driver's watcher of a cancellable context (go-sql-driver's) costs two
// goroutine wake-ups per statement (20–25 µs on loopback), and closes the
// socket too. Sockets are known only on the driver's own pool; elsewhere
// statements take the caller's context.
package dbconn
