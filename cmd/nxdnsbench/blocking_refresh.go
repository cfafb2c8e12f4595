package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/load"
)

// The blocking run's refresh row (issue 27: "a refresh never delays a
// query — the hit path's p99 during a refresh within 10 % of without"):
// the load client asks the hits row's number of names over and over at
// the nxdnsd with the list, all cache hits after a first round, once
// while nothing else happens and once while the list is refreshed back
// to back: a rule appended to its file (so that each refresh builds a new
// copy, not a "not modified"), POST /api/lists/refresh, and GET
// /api/lists until the new copy is in force. The figure is the p99 of
// the two runs' latencies.

// maxRefreshP99 is issue 27's bound on the hit path's p99 during a
// refresh, as a multiple of it without.
const maxRefreshP99 = 1.10

// refreshRun is the refresh row.
type refreshRun struct {
	idle, busy *load.Result
	refreshes  int           // copies built and put in force during busy
	took       time.Duration // the refreshes' mean time from the POST to the new copy in force
	err        error         // why a refresh failed, if one did
}

// measureRefresh runs the refresh row at nx, whose list is the file list
// (listName in its configuration).
func measureRefresh(ctx context.Context, c runConfig, nx *child, list string, progress func(string, ...any)) (*refreshRun, error) {
	lc := load.Config{Server: nx.addr, InFlight: c.latencyInFlight, Timeout: 2 * time.Second, Prefix: "r", Names: c.hitNames}
	warm := lc
	warm.Queries = 2 * c.hitNames
	if _, err := load.Run(ctx, warm); err != nil { // the names in the cache
		return nil, err
	}
	lc.Duration = c.perf.Duration
	rr := &refreshRun{}
	var err error
	progress("refresh row: %d hit names, %d in flight for %s -> nxdnsd %s, no refresh", c.hitNames, c.latencyInFlight, lc.Duration, nx.addr)
	if rr.idle, err = load.Run(ctx, lc); err != nil {
		return nil, err
	}
	progress("refresh row: the same while %s is refreshed back to back", listName)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { rr.refreshes, rr.took, rr.err = refreshLoop(rctx, nx, list) })
	rr.busy, err = load.Run(ctx, lc)
	stop()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	return rr, nil
}

// listName is the blocking rows' list in nxdnsd's configuration
// (daemonConf.BlockList).
const listName = "bench"

// refreshLoop refreshes the list at nx until ctx ends: each round appends
// a rule to the file and waits for the copy with it to be in force (the
// list's rules in force one more than before the round). It returns the
// rounds completed and their mean time.
func refreshLoop(ctx context.Context, nx *child, list string) (n int, mean time.Duration, err error) {
	var total time.Duration
	ended := func(err error) (int, time.Duration, error) {
		if ctx.Err() != nil {
			return n, avg(total, n), nil // the run ended during this round
		}
		return n, 0, err
	}
	for ctx.Err() == nil {
		before, err := listRules(ctx, nx)
		if err != nil {
			return ended(err)
		}
		if err := appendRule(list, fmt.Sprintf("||refresh-%d.bench.invalid^", n)); err != nil {
			return n, 0, err
		}
		start := time.Now()
		if err := adminDo(ctx, nx, http.MethodPost, "/api/lists/refresh?name="+listName, http.StatusAccepted, nil); err != nil {
			return ended(err)
		}
		for {
			rules, err := listRules(ctx, nx)
			if err != nil {
				return ended(err)
			}
			if rules > before {
				break
			}
			select {
			case <-ctx.Done():
				return ended(nil)
			case <-time.After(5 * time.Millisecond):
			}
		}
		n++
		total += time.Since(start)
	}
	return n, avg(total, n), nil
}

// listRules is the rules in force of the list, from GET /api/lists.
func listRules(ctx context.Context, nx *child) (int, error) {
	var lists struct {
		Lists []struct {
			Name  string `json:"name"`
			Rules int    `json:"rules"`
		} `json:"lists"`
	}
	if err := adminDo(ctx, nx, http.MethodGet, "/api/lists", http.StatusOK, &lists); err != nil {
		return 0, err
	}
	for _, l := range lists.Lists {
		if l.Name == listName {
			return l.Rules, nil
		}
	}
	return 0, fmt.Errorf("GET /api/lists: no list %q", listName)
}

// appendRule appends a line to the list's file.
func appendRule(list, rule string) error {
	f, err := os.OpenFile(list, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, rule)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func avg(total time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return total / time.Duration(n)
}

// adminDo sends a request to nx's admin API and decodes its JSON answer
// into out (nil: none), wanting the status want.
func adminDo(ctx context.Context, nx *child, method, path string, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+nx.admin.String()+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// writeRefresh is the refresh row's table.
func (r *report) writeRefresh(b *strings.Builder, rr *refreshRun) {
	fmt.Fprintf(b, "\n### Blocking: the hit path during a refresh, load client, %d names, %d in flight, %s each\n\n",
		r.cfg.hitNames, r.cfg.latencyInFlight, r.cfg.perf.Duration)
	fmt.Fprintf(b, "| run | answered/s | p50 | p99 | max | timeouts |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range []struct {
		name string
		res  *load.Result
	}{{"no refresh", rr.idle}, {fmt.Sprintf("%d refreshes back to back, %s each", rr.refreshes, ms(rr.took)), rr.busy}} {
		res := x.res
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d |\n", x.name, thousands(res.QPS()), ms(res.Percentile(0.5)),
			ms(res.Percentile(0.99)), ms(res.Percentile(1)), res.Timeouts)
	}
	fmt.Fprintf(b, "\nEach refresh appends one rule to the list's file, so that it builds a new copy of the whole list, "+
		"asks for it with POST /api/lists/refresh and polls GET /api/lists until the copy is in force; then the next begins.\n")
	if rr.err != nil {
		fmt.Fprintf(b, "\nA refresh failed: %v\n", rr.err)
	}
}

// verdictRefresh is issue 27's refresh check.
func (r *report) verdictRefresh(check func(bool, string, ...any), notChecked func(string, ...any), rr *refreshRun) {
	if rr.refreshes == 0 || rr.err != nil {
		notChecked("issue 27, the hit path's p99 during a refresh: no refresh completed during the run (%v)", rr.err)
		return
	}
	idle, busy := rr.idle.Percentile(0.99), rr.busy.Percentile(0.99)
	ratio := float64(busy) / float64(idle)
	check(ratio <= maxRefreshP99, "issue 27, the hit path's p99 during %d refreshes: %s, %.2f × its %s without <= %.2f ×",
		rr.refreshes, ms(busy), ratio, ms(idle), maxRefreshP99)
}
