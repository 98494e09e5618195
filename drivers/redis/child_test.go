package redis

import "fmt"

// runChild runs a child role of a re-executed test binary.
func runChild(role string) int {
	switch role {
	case "hold":
		return childHold()
	default:
		fmt.Printf("unknown child role %q\n", role)
		return 2
	}
}
