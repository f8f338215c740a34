package workflows

import (
	"strings"
	"time"
)

// formatDuration prints a duration the way people write NodePool durations:
// "30s", "5m", "1h30m", "720h" rather than Go's "5m0s" and "720h0m0s".
func formatDuration(d time.Duration) string {
	text := d.String()
	if strings.HasSuffix(text, "m0s") {
		text = strings.TrimSuffix(text, "0s")
	}
	if strings.HasSuffix(text, "h0m") {
		text = strings.TrimSuffix(text, "0m")
	}
	return text
}
