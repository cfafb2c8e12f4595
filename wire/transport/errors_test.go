package transport

import (
	"slices"
	"testing"

	"github.com/nxdnsd/nxdnsd/internal/gosrc"
)

// sentinelsByName is every sentinel error of this package, for the tests
// that compare failures sentinel by sentinel. TestSentinelsListed keeps it
// complete.
var sentinelsByName = map[string]error{
	"ErrRefused":          ErrRefused,
	"ErrIDMismatch":       ErrIDMismatch,
	"ErrQuestionMismatch": ErrQuestionMismatch,
	"ErrMalformed":        ErrMalformed,
	"ErrPack":             ErrPack,
	"ErrResolverTimeout":  ErrResolverTimeout,
	"ErrHTTPStatus":       ErrHTTPStatus,
	"ErrContentType":      ErrContentType,
	"ErrBootstrap":        ErrBootstrap,
}

// A sentinel declared in this package and missing from sentinelsByName
// would go unchecked by sameSentinel. Mutation check: declaring another
// exported errors.New variable fails it.
func TestSentinelsListed(t *testing.T) {
	declared, err := gosrc.ErrorVars(".")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for name := range sentinelsByName {
		listed = append(listed, name)
	}
	slices.Sort(listed)
	if !slices.Equal(declared, listed) {
		t.Errorf("sentinels declared %v, listed in sentinelsByName %v", declared, listed)
	}
}
