package admin

import (
	"net/http"
	"strconv"
)

// Queries is what GET /api/queries reads: the daemon's ring of recent
// queries (admin.recent_queries).
type Queries interface {
	// Cap returns how many queries are kept; 0 when none are.
	Cap() int

	// AppendJSON appends up to limit kept queries to b, newest first, as
	// the comma-separated elements of a JSON array: the query-log objects
	// of spec section 6, each with its attempt trail.
	AppendJSON(b []byte, limit int) []byte
}

// queryJSONSize is a generous guess at one query's JSON with a two-attempt
// trail, to size the response buffer once for the page's usual ask; a
// larger one grows as it is written.
const (
	queryJSONSize = 400
	presized      = 256 // queries
)

// serveQueries answers GET /api/queries?limit=N: the last N answered
// queries, newest first (all that are kept when limit is absent).
func (s *Server) serveQueries(w http.ResponseWriter, r *http.Request) {
	capacity := 0
	if s.cfg.Queries != nil {
		capacity = s.cfg.Queries.Cap()
	}
	limit := capacity
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, "limit must be a whole number, 0 or more", http.StatusBadRequest)
			return
		}
		limit = min(n, capacity)
	}
	b := make([]byte, 0, 64+min(limit, presized)*queryJSONSize)
	b = append(b, `{"capacity":`...)
	b = strconv.AppendInt(b, int64(capacity), 10)
	b = append(b, `,"queries":[`...)
	if limit > 0 {
		b = s.cfg.Queries.AppendJSON(b, limit)
	}
	b = append(b, "]}\n"...)
	writeJSON(w, http.StatusOK, b)
}

// writeJSON sends body, which is JSON, with code; nothing of it is cached.
func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
