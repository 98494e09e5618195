//go:build !unix

package redis

import (
	"testing"
	"time"
)

// processCPU is not measured on this platform: 0.
func processCPU(*testing.B) time.Duration { return 0 }
