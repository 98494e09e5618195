package postgres

import (
	"fmt"
	"os"
)

// runChild plays a re-executed test binary's role.
func runChild(role string) int {
	switch role {
	default:
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
		return 2
	}
}
