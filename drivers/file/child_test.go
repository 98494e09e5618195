package file_test

import (
	"fmt"
	"os"
)

// runChild plays a child role of the process tests and returns the exit code.
func runChild(role string) int {
	fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
	return 2
}
