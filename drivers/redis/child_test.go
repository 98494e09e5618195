package redis

import "fmt"

// runChild runs a child role of a re-executed test binary.
func runChild(role string) int {
	switch role {
	default:
		fmt.Printf("unknown child role %q\n", role)
		return 2
	}
}
