//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
)

// lockView is a held lock as list and inspect print it.
type lockView struct {
	Name        string `json:"name"`
	Held        bool   `json:"held"`
	Application string `json:"application,omitempty"`
	Host        string `json:"host,omitempty"`
	PID         int    `json:"pid,omitempty"`
	// AcquiredAt and HeldFor are absent when the holder is unknown.
	AcquiredAt *time.Time `json:"acquiredAt,omitempty"`
	HeldFor    string     `json:"heldFor,omitempty"`
	Fence      uint64     `json:"fence,omitempty"`
	// TTL is the time left before expiry; absent for locks that do not
	// expire.
	TTL string `json:"ttl,omitempty"`
}

func view(st component.LockStatus, now time.Time) lockView {
	v := lockView{Name: st.Name, Held: true, Fence: st.Fence}
	if st.HolderKnown {
		v.Application, v.Host, v.PID = st.Holder.Application, st.Holder.Host, st.Holder.PID
	}
	if h := st.Holder; st.HolderKnown && !h.AcquiredAt.IsZero() { // (unknown for another process's advisory lock)
		at := h.AcquiredAt.UTC()
		v.AcquiredAt = &at
		v.HeldFor = now.Sub(h.AcquiredAt).Round(time.Millisecond).String()
	}
	if st.TTL > 0 {
		v.TTL = st.TTL.Round(time.Millisecond).String()
	}
	return v
}

func (v lockView) holder() string {
	if v.Host == "" {
		return "?"
	}
	return v.Application + "@" + v.Host + ":" + strconv.Itoa(v.PID)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printTable(w io.Writer, vs []lockView) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOLDER\tFENCE\tHELD FOR\tTTL LEFT")
	for _, v := range vs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", strconv.Quote(v.Name), v.holder(), v.Fence, dash(v.HeldFor), dash(v.TTL))
	}
	return tw.Flush()
}

func printJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

func newList(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the held locks of the store, with their holders",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withStore(cmd.Context(), func(m *mutexfx.Mutex) error {
				ctx, cancel := g.call(cmd.Context())
				defer cancel()
				sts, err := m.List(ctx)
				if err != nil {
					return callError(ctx, err)
				}
				now := time.Now()
				vs := make([]lockView, len(sts))
				for i, st := range sts {
					vs[i] = view(st, now)
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), vs)
				}
				return printTable(cmd.OutOrStdout(), vs)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newInspect(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show who holds the lock NAME, or \"free\"",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return g.withStore(cmd.Context(), func(m *mutexfx.Mutex) error {
				ctx, cancel := g.call(cmd.Context())
				defer cancel()
				st, held, err := m.Inspect(ctx, a[0])
				if err != nil {
					return callError(ctx, err)
				}
				v := lockView{Name: a[0]}
				if held {
					v = view(st, time.Now())
				}
				out := cmd.OutOrStdout()
				switch {
				case asJSON:
					return printJSON(out, v)
				case !held:
					_, err := fmt.Fprintln(out, "free")
					return err
				}
				fmt.Fprintf(out, "name:        %q\nholder:      %s\n", v.Name, v.holder())
				if v.AcquiredAt != nil {
					fmt.Fprintf(out, "acquired at: %s\nheld for:    %s\n", v.AcquiredAt.Format(time.RFC3339Nano), v.HeldFor)
				}
				_, err = fmt.Fprintf(out, "fence:       %d\nttl left:    %s\n", v.Fence, dash(v.TTL))
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
