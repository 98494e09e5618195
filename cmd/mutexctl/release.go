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
				ctx, out := cmd.Context(), cmd.OutOrStdout()
				st, held, err := m.Inspect(ctx, a[0])
				if err != nil {
					return err
				}
				if !held {
					_, err := fmt.Fprintln(out, "free")
					return err
				}
				v := view(st, time.Now())
				if !yes {
					fmt.Fprintf(out, "release %q held by %s (fence %d)? [y/N] ", v.Name, v.holder(), v.Fence)
					line, _ := bufio.NewReader(g.stdin).ReadString('\n')
					if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
						return &exitError{code: ExitError, err: errors.New("not released")}
					}
				}
				ok, err := m.ForceRelease(ctx, a[0])
				if err != nil {
					return err
				}
				if !ok {
					return &exitError{code: ExitError, err: fmt.Errorf("%q changed holder or was released meanwhile: not released", v.Name)}
				}
				_, err = fmt.Fprintf(out, "released %q (was held by %s, fence %d)\n", v.Name, v.holder(), v.Fence)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "required: break the lock whoever holds it")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}
