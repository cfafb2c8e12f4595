package fake

import (
	"fmt"
	"strings"
	"time"
)

// Kind is how a fake upstream treats the queries it reads.
type Kind uint8

// The kinds of behaviour, as the fault scenarios need them.
const (
	Answer    Kind = iota // answer every query at once
	Blackhole             // read every query and never answer
	Delay                 // answer every query after Mode.Delay
	Refuse                // answer every query at once with REFUSED
)

// Mode is a fake upstream's behaviour. The zero Mode answers at once.
type Mode struct {
	Kind  Kind
	Delay time.Duration // Delay only: how long each answer is held
}

// String returns the mode in ParseMode's syntax.
func (m Mode) String() string {
	switch m.Kind {
	case Answer:
		return "answer"
	case Blackhole:
		return "blackhole"
	case Delay:
		return "delay=" + m.Delay.String()
	case Refuse:
		return "refuse"
	default:
		return fmt.Sprintf("kind(%d)", m.Kind)
	}
}

// ParseMode reads "answer", "blackhole", "refuse" or "delay=DURATION" (a
// time.ParseDuration string, e.g. "delay=3s", "delay=100ms").
func ParseMode(s string) (Mode, error) {
	switch s {
	case "answer":
		return Mode{Kind: Answer}, nil
	case "blackhole":
		return Mode{Kind: Blackhole}, nil
	case "refuse":
		return Mode{Kind: Refuse}, nil
	}
	if v, ok := strings.CutPrefix(s, "delay="); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Mode{}, fmt.Errorf("fake mode %q: want delay=DURATION with a positive duration", s)
		}
		return Mode{Kind: Delay, Delay: d}, nil
	}
	return Mode{}, fmt.Errorf("fake mode %q: want answer, blackhole, refuse or delay=DURATION", s)
}
