//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mutexfx/mutexfx"
)

func newRelease(g *globals) *cobra.Command {
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "release NAME --force",
		Short: "Break the lock NAME held by someone else",
		Long: "Frees the lock NAME whoever holds it. Its holder is told it lost the lock at its next\n" +
			"renewal (within a third of its ttl); the lock's fence still only grows. Asks for\n" +
			"confirmation unless --yes.",
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if !force {
				return usageError{errors.New("release breaks another holder's lock: add --force")}
			}
			return g.withStore(cmd.Context(), func(m *mutexfx.Mutex) error {
				return release(cmd, g, m, a[0], yes)
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "required: break the lock whoever holds it")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// release breaks the lock name, once the operator confirmed it unless
// yes. Each store call is bounded by --store-timeout; the wait for the
// answer is not.
func release(cmd *cobra.Command, g *globals, m *mutexfx.Mutex, name string, yes bool) error {
	out := cmd.OutOrStdout()
	ctx, cancel := g.call(cmd.Context())
	defer cancel()
	st, held, err := m.Inspect(ctx, name)
	if err != nil {
		return callError(ctx, err)
	}
	if !held {
		_, err := fmt.Fprintln(out, "free")
		return err
	}
	v := view(st, time.Now())
	if !yes {
		fmt.Fprintf(out, "release %q held by %s (fence %d)? [y/N] ", v.Name, v.holder(), v.Fence)
		line, _ := bufio.NewReader(g.stdin).ReadString('\n')
		if answer := strings.ToLower(strings.TrimSpace(line)); answer != "y" && answer != "yes" {
			return &exitError{code: ExitError, err: errors.New("not released")}
		}
	}
	// The answer may come long after the inspection: break the lock only
	// if it still has the holder shown (one store call, by its token).
	ctx, cancel = g.call(cmd.Context())
	defer cancel()
	ok, err := m.ForceReleaseHolder(ctx, st)
	if err != nil {
		return callError(ctx, err)
	}
	if !ok {
		return &exitError{code: ExitError, err: fmt.Errorf("%q changed holder or was released meanwhile: not released", name)}
	}
	_, err = fmt.Fprintf(out, "released %q (was held by %s, fence %d)\n", v.Name, v.holder(), v.Fence)
	return err
}
