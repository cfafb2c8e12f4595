package daemon

import (
	"sync"
	"sync/atomic"

	"github.com/nxdnsd/nxdnsd/query"
	"github.com/nxdnsd/nxdnsd/wire/server"
)

// The words of a query.Entry (its proto, source, zone outcome and cache
// result) as the ring of recent queries keeps them: a byte each. The
// query path's words are the constants below, each a case of wordCode's
// switch (a few comparisons, nothing locked); any other word is given
// the next free code the first time it is seen, under a lock, and read
// back from the table as any other. Past 255 words the rest read as "?".

// knownWords are the codes of the query path's words: the code of
// knownWords[i] is i (TestWordCodesMatchTable).
var knownWords = [...]string{
	"",
	query.ProtoUDP, "tcp", server.ProtoTLS, server.ProtoHTTPS,
	query.SourceSpecial, query.SourceLocal, query.SourceForwardZone, query.SourcePool,
	query.SourceCache, query.SourceStale, query.SourceRefused, query.SourceBlocked,
	query.ZoneAnswer, query.ZoneTimeout, query.ZoneError,
	query.CacheHit, query.CacheMiss, query.CacheCachedFailure,
}

// wordCode is w's code.
func wordCode(w string) uint8 {
	switch w {
	case "":
		return 0
	case query.ProtoUDP:
		return 1
	case "tcp":
		return 2
	case server.ProtoTLS:
		return 3
	case server.ProtoHTTPS:
		return 4
	case query.SourceSpecial:
		return 5
	case query.SourceLocal:
		return 6
	case query.SourceForwardZone:
		return 7
	case query.SourcePool:
		return 8
	case query.SourceCache:
		return 9
	case query.SourceStale: // query.CacheStale too
		return 10
	case query.SourceRefused:
		return 11
	case query.SourceBlocked:
		return 12
	case query.ZoneAnswer:
		return 13
	case query.ZoneTimeout:
		return 14
	case query.ZoneError:
		return 15
	case query.CacheHit:
		return 16
	case query.CacheMiss:
		return 17
	case query.CacheCachedFailure:
		return 18
	}
	return moreWords.code(w)
}

// word is the word of code c.
func word(c uint8) string {
	if int(c) < len(knownWords) {
		return knownWords[c]
	}
	return moreWords.word(c)
}

// wordTable gives the words past knownWords their codes: an append-only
// list, copied on each addition, read without a lock.
type wordTable struct {
	mu    sync.Mutex
	words atomic.Pointer[[]string] // the codes from len(knownWords) on
}

var moreWords wordTable

func (t *wordTable) code(w string) uint8 {
	if ws := t.words.Load(); ws != nil {
		for i, x := range *ws {
			if x == w {
				return uint8(len(knownWords) + i)
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var ws []string
	if p := t.words.Load(); p != nil {
		ws = *p
	}
	for i, x := range ws {
		if x == w {
			return uint8(len(knownWords) + i)
		}
	}
	if len(knownWords)+len(ws) >= 255 {
		return 255 // full: reads as "?"
	}
	next := append(append([]string(nil), ws...), w)
	t.words.Store(&next)
	return uint8(len(knownWords) + len(ws))
}

func (t *wordTable) word(c uint8) string {
	if ws := t.words.Load(); ws != nil && c != 255 {
		if i := int(c) - len(knownWords); i < len(*ws) {
			return (*ws)[i]
		}
	}
	return "?"
}
