package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Entry kinds of the history: what the nemesis did and what the suite saw.
const (
	KindFault       = "fault"       // a fault injected (Fault names its kind)
	KindHeal        = "heal"        // a fault lifted
	KindChurn       = "churn"       // a workload change
	KindObservation = "observation" // a sample of the system
	KindViolation   = "violation"   // an invariant broken
	KindPhase       = "phase"       // the run moved on (run, heal, quiesce, check)
)

// Entry is one line of the JSON-lines history.
type Entry struct {
	Time time.Time `json:"t"`
	Kind string    `json:"kind"`
	// Fault, Churn, Invariant or Phase, by Kind.
	What   string         `json:"what"`
	Fields map[string]any `json:"fields,omitempty"`
}

// History appends every entry to a JSON-lines file as it happens, so a run
// that dies still leaves what led there.
type History struct {
	mu   sync.Mutex
	file *os.File
	enc  *json.Encoder
	// counts are entries by kind and what.
	counts map[string]map[string]int
}

// NewHistory creates (truncates) path.
func NewHistory(path string) (*History, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("chaos history: %w", err)
	}
	return &History{file: f, enc: json.NewEncoder(f), counts: map[string]map[string]int{}}, nil
}

// Record appends an entry; fields alternate names and values.
func (h *History) Record(kind, what string, fields ...any) {
	e := Entry{Time: time.Now().UTC(), Kind: kind, What: what}
	if len(fields) > 0 {
		e.Fields = map[string]any{}
		for i := 0; i+1 < len(fields); i += 2 {
			name := fmt.Sprint(fields[i])
			if err, ok := fields[i+1].(error); ok {
				e.Fields[name] = err.Error()
				continue
			}
			e.Fields[name] = fields[i+1]
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.enc.Encode(e)
	if h.counts[kind] == nil {
		h.counts[kind] = map[string]int{}
	}
	h.counts[kind][what]++
}

// Counts are the entries of kind recorded so far, by what.
func (h *History) Counts(kind string) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.counts[kind] {
		out[k] = v
	}
	return out
}

// Close flushes and closes the file.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.file.Close()
}
