package schedule

import (
	"errors"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// errEvery refuses @every, with or without CRON_TZ.
var errEvery = errors.New("@every is not aligned on the clock: use Every")

// cronPlan is a cron expression with its time zone, planned as standard
// (Vixie) cron does across daylight-saving changes. A fixed-time job (its
// minute and hour fields not starting with '*') runs once per wall time it
// names: a wall time skipped when the clocks go forward runs at the change
// (30 2 * * * at 03:00 on the spring-forward day in New York), a wall time
// repeated when they go back runs at its first occurrence only (30 1 * * *
// at 01:30 EDT, not again at 01:30 EST). A wildcard job ("*/15 * * * *",
// "0 * * * *", @hourly) follows the clock: nothing for the skipped hour,
// both passes of the repeated one.
type cronPlan struct {
	// inZone is the expression in its zone, as robfig/cron reads it: the
	// plan of wildcard jobs.
	inZone *cron.SpecSchedule
	// wall is the expression on wall-clock times written as UTC: the plan
	// of fixed-time jobs, mapped back to instants by instant.
	wall *cron.SpecSchedule
	// fixed: a fixed-time job.
	fixed bool
}

// parseCron parses text in loc, unless it names its zone (CRON_TZ=).
func parseCron(text string, loc *time.Location) (*cronPlan, error) {
	s, err := cronParser.Parse(text)
	if err != nil {
		return nil, err
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, errEvery
	}
	fields := strings.TrimSpace(text)
	if strings.HasPrefix(fields, "TZ=") || strings.HasPrefix(fields, "CRON_TZ=") {
		_, fields, _ = strings.Cut(fields, " ")
		fields = strings.TrimSpace(fields)
	} else {
		spec.Location = loc
	}
	wall := *spec
	wall.Location = time.UTC
	return &cronPlan{inZone: spec, wall: &wall, fixed: fixedTime(fields)}, nil
}

// fixedTime reports whether the cron fields (no CRON_TZ) make a fixed-time
// job in Vixie cron's sense: neither the minute nor the hour field starts
// with '*' ('?' is robfig/cron's '*'). @hourly is "0 * * * *".
func fixedTime(fields string) bool {
	if strings.HasPrefix(fields, "@") {
		return fields != "@hourly"
	}
	f := strings.Fields(fields)
	wild := func(s string) bool { return strings.HasPrefix(s, "*") || strings.HasPrefix(s, "?") }
	return len(f) >= 2 && !wild(f[0]) && !wild(f[1])
}

// next returns the first instant strictly after t, or the zero time when
// there is none in the five years after t.
func (c *cronPlan) next(t time.Time) time.Time {
	if !c.fixed {
		return c.inZone.Next(t)
	}
	loc := c.inZone.Location
	if loc == time.Local { // robfig/cron's rule: the zone of the time asked
		loc = t.Location()
	}
	for w := wallOf(t.In(loc)); ; {
		if w = c.wall.Next(w); w.IsZero() {
			return w
		}
		// A wall time in the repeated hour that first occurred before t
		// has run already: the next one.
		if at := instant(w, loc); at.After(t) {
			return at.In(t.Location())
		}
	}
}

// wallOf returns t's wall-clock reading written as a UTC time.
func wallOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant returns the first instant at which loc's wall clock reads w
// (written as UTC); for a wall time that loc skips (clocks going forward),
// the instant of the change.
func instant(w time.Time, loc *time.Location) time.Time {
	u := w.Unix()
	offset := func(sec int64) int64 {
		_, off := time.Unix(sec, 0).In(loc).Zone()
		return int64(off)
	}
	// The offsets in effect a day before and after w's reading cover any
	// one change near it.
	before, after := offset(u-86400), offset(u+86400)
	var first time.Time
	for _, off := range []int64{before, after} {
		if x := time.Unix(u-off, 0).In(loc); wallOf(x).Equal(w) && (first.IsZero() || x.Before(first)) {
			first = x
		}
	}
	if !first.IsZero() {
		return first
	}
	// Skipped: the change lies in (u-after, u-before], where the offset
	// goes from before to after. Find its second.
	lo, hi := u-after, u-before
	if lo >= hi || offset(lo) != before || offset(hi) == before {
		return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc) // not one change: Go's choice
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if offset(mid) == before {
			lo = mid
		} else {
			hi = mid
		}
	}
	return time.Unix(hi, 0).In(loc)
}
