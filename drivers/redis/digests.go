package redis

// ScriptDigests returns the SHA1 digest of each Lua script the driver runs,
// by name ("acquire", "release", "handover", "leave", "extend", "renew",
// "inspect"), as EVALSHA sends it and SLOWLOG, MONITOR and SCRIPT EXISTS
// show it: for telling the scripts apart when measuring the server's time
// per script. The epoch script, sent with EVAL when a driver finds a new
// server process, is not among them.
func ScriptDigests() map[string]string {
	return map[string]string{
		"acquire":  acquireScript.Hash(),
		"release":  releaseScript.Hash(),
		"handover": handoverScript.Hash(),
		"leave":    leaveScript.Hash(),
		"extend":   extendScript.Hash(),
		"renew":    renewScript.Hash(),
		"inspect":  inspectScript.Hash(),
	}
}
