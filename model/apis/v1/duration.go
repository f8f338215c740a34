package v1

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The duration fields are kept as the text the user wrote rather than as a
// parsed time.Duration: the CRD's patterns are rules about that text (e.g.
// "1.5h" and "500ms" are rejected although Go parses them), so Validate can
// only apply the same rules if it sees the same text, and a manifest
// round-trips byte for byte (no "720h" -> "720h0m0s" diff for GitOps tools).

// Never is the DurationOrNever value that switches a timer off.
const Never DurationOrNever = "Never"

// DurationOrNever is a duration written as whole hours, minutes and seconds
// ("720h", "1h30m", "30s") or the word "Never". The empty value means "not
// set"; defaulting replaces it.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
type DurationOrNever string

// Duration is a duration written as whole hours, minutes and seconds ("90s",
// "1h30m"). Each field that uses it narrows the units it accepts with its own
// pattern.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=32
type Duration string

// The patterns the CRD applies to each duration field, compiled once for the
// Go-side checks. Keep them identical to the markers.
const (
	durationOrNeverPattern        = `^(([0-9]+(s|m|h))+|Never)$`
	terminationGracePeriodPattern = `^([0-9]+(s|m|h))+$`
	budgetDurationPattern         = `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	softGracePeriodPattern        = `^([0-9]+(s|m|h))+$`
)

var (
	durationOrNeverRE        = regexp.MustCompile(durationOrNeverPattern)
	terminationGracePeriodRE = regexp.MustCompile(terminationGracePeriodPattern)
	budgetDurationRE         = regexp.MustCompile(budgetDurationPattern)
	softGracePeriodRE        = regexp.MustCompile(softGracePeriodPattern)
)

// Parse returns the duration, or never=true for "Never". Text that does not
// match the field's pattern, or overflows, is an error; so is the empty value
// (apply defaults first).
func (d DurationOrNever) Parse() (dur time.Duration, never bool, err error) {
	if d == Never {
		return 0, true, nil
	}
	if !durationOrNeverRE.MatchString(string(d)) {
		return 0, false, fmt.Errorf("%q is not a duration in h, m and s units or %q", string(d), string(Never))
	}
	dur, err = time.ParseDuration(string(d))
	if err != nil {
		return 0, false, fmt.Errorf("%q: %w", string(d), err)
	}
	return dur, false, nil
}

// Parse returns the duration. It accepts any non-negative Go duration text;
// the field-specific unit rules are Validate's job.
func (d Duration) Parse() (time.Duration, error) {
	dur, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, fmt.Errorf("%q: %w", string(d), err)
	}
	if dur < 0 {
		return 0, fmt.Errorf("%q is negative", string(d))
	}
	return dur, nil
}

// DurationOrNeverOf writes d in the compact form the CRD accepts ("1h30m",
// "30s", "0s"). Sub-second parts are truncated because the API has no unit
// for them.
func DurationOrNeverOf(d time.Duration) DurationOrNever {
	return DurationOrNever(compactDuration(d))
}

// DurationOf writes d in the compact form the CRD accepts, see
// DurationOrNeverOf.
func DurationOf(d time.Duration) Duration { return Duration(compactDuration(d)) }

func compactDuration(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	var b strings.Builder
	hours := d / time.Hour
	minutes := (d % time.Hour) / time.Minute
	seconds := (d % time.Minute) / time.Second
	if hours > 0 {
		b.WriteString(strconv.FormatInt(int64(hours), 10) + "h")
	}
	if minutes > 0 {
		b.WriteString(strconv.FormatInt(int64(minutes), 10) + "m")
	}
	if seconds > 0 {
		b.WriteString(strconv.FormatInt(int64(seconds), 10) + "s")
	}
	return b.String()
}
