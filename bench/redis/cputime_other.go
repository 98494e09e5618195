//go:build !unix

package main

import "time"

// cpuTime is zero where getrusage is missing: the renewal's CPU share then
// reads 0.
func cpuTime() time.Duration { return 0 }
