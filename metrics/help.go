package metrics

import (
	"bytes"
	"strings"
)

// help is the HELP text of every family nxdnsd writes (spec section 7),
// but those written with a text of their own (probes.go), and of the Go
// runtime and process families the library writes. The library writes
// each family's "# HELP name" line without a text (it has no place to
// keep one); withHelp fills them in from here at scrape time.
var help = map[string]string{
	"nxdns_build_info":                        "Always 1; the labels say which nxdnsd is running: its version and the Go version it was built with.",
	"nxdns_queries_total":                     "Client queries answered, by the listener's transport and the rcode sent.",
	"nxdns_query_duration_seconds":            "Time from a client query's arrival to its packed answer, whatever answered it (cache, local records, a forward zone or the pool).",
	"nxdns_upstream_success_total":            "Recorded successes of client queries at each upstream: answers. Probes are not counted.",
	"nxdns_upstream_failure_total":            "Recorded failures of client queries at each upstream: full-budget expiries and peer faults (what counts toward backoff). Probes are not counted.",
	"nxdns_upstream_in_flight":                "Exchanges in flight to each upstream now: its slots taken.",
	"nxdns_upstream_slots":                    "Each upstream's configured capacity (upstreams[].slots): exchanges in flight at once.",
	"nxdns_upstream_backoff":                  "1 while the upstream is in backoff (no client query is sent to it until a probe's answer heals it), else 0.",
	"nxdns_upstream_attempt_duration_seconds": "Duration of each attempt at an upstream, however it ended.",
	"nxdns_upstream_attempts_total":           "Every attempt at an upstream once, by how it ended: answer, expired (full budget, recorded), censored (cut short by the query's deadline, not recorded), peer_fault, local_error, canceled.",
	"nxdns_upstream_queued_total":             "Client queries that waited for a slot because every eligible upstream was full, however the wait ended.",
	"nxdns_upstream_queued_seconds_total":     "Time client queries spent waiting for a slot.",
	"nxdns_upstream_budget_exhausted_total":   "Client queries whose whole budget (upstream.total_timeout_ms) ran out before an answer: answered SERVFAIL.",
	"nxdns_upstream_share_refused_total":      "Client queries answered REFUSED because their client held its share of the upstream slots while other clients were active, and no slot was free beyond the few kept for them. No upstream is blamed.",
	"nxdns_forward_zone_queries_total":        "Exchanges with each forward zone's resolver, by outcome: answer, timeout or error.",
	"nxdns_query_log_dropped_total":           "Query-log lines dropped because the writer fell behind the queries (a slow disk), or lost because a write failed (a full disk).",
	"nxdns_overload_refused_total":            "Client queries answered REFUSED because server.max_concurrent_queries were being served, or the client's share of them.",
	"nxdns_panics_total":                      "Panics recovered while serving a query (each answered SERVFAIL and logged with its stack): a bug, please report it.",
	"nxdns_acl_refused_total":                 "Client queries refused because the client is outside server.allow.",
	"nxdns_rebind_stripped_total":             "Answers from the pool, fresh or cached, from which rebinding protection removed private addresses (server.rebind_protection).",
	"nxdns_cache_lookups_total":               "Answer-cache lookups by result: hit (a fresh answer), miss, stale (an expired answer within its stale window), cached_failure (a remembered failure).",
	"nxdns_cache_entries":                     "Answers the cache holds now.",
	"nxdns_cache_bytes":                       "Bytes the cache holds now, against cache.size_mib.",
	"nxdns_cache_evictions_total":             "Answers evicted from the cache to make room.",
	"nxdns_cache_prefetches_total":            "Background refreshes of cached answers asked for near their expiry, by outcome: answer or failure.",
	"nxdns_config_reloads_total":              "Configuration reloads (SIGHUP) by result: success, or failure (the running configuration stayed).",

	// The library's Go runtime and process metrics, described as its
	// documentation (WriteProcessMetrics) describes them.
	"go_sched_latencies_seconds":                    "Time goroutines spent runnable before running (runtime/metrics /sched/latencies).",
	"go_mutex_wait_seconds_total":                   "Time goroutines spent blocked on a sync.Mutex or sync.RWMutex.",
	"go_gc_mark_assist_cpu_seconds_total":           "CPU time goroutines spent assisting the garbage collector's marking.",
	"go_gc_cpu_seconds_total":                       "CPU time spent in the garbage collector.",
	"go_gc_pauses_seconds":                          "Durations of the garbage collector's stop-the-world pauses.",
	"go_scavenge_cpu_seconds_total":                 "CPU time spent returning memory to the operating system.",
	"go_memlimit_bytes":                             "The Go runtime's memory limit (GOMEMLIMIT).",
	"go_memstats_alloc_bytes":                       "Bytes of Go objects in the heap.",
	"go_memstats_alloc_bytes_total":                 "Bytes of Go objects allocated since start.",
	"go_memstats_buck_hash_sys_bytes":               "Bytes of memory in profiling bucket hash tables.",
	"go_memstats_frees_total":                       "Go objects freed since start.",
	"go_memstats_gc_cpu_fraction":                   "The fraction of CPU time spent in the garbage collector since start.",
	"go_memstats_gc_sys_bytes":                      "Bytes of garbage-collector metadata.",
	"go_memstats_heap_alloc_bytes":                  "Bytes of Go objects in the heap (as go_memstats_alloc_bytes).",
	"go_memstats_heap_idle_bytes":                   "Bytes of heap spans with no objects, ready for new allocations.",
	"go_memstats_heap_inuse_bytes":                  "Bytes of heap spans in use.",
	"go_memstats_heap_objects":                      "Go objects in the heap.",
	"go_memstats_heap_released_bytes":               "Bytes of heap memory returned to the operating system.",
	"go_memstats_heap_sys_bytes":                    "Bytes of heap memory obtained from the operating system.",
	"go_memstats_last_gc_time_seconds":              "When the last garbage collection finished, in seconds since the Unix epoch.",
	"go_memstats_lookups_total":                     "Pointer lookups performed by the runtime.",
	"go_memstats_mallocs_total":                     "Go objects allocated since start.",
	"go_memstats_mcache_inuse_bytes":                "Bytes of mcache structures in use.",
	"go_memstats_mcache_sys_bytes":                  "Bytes of memory obtained from the operating system for mcache structures.",
	"go_memstats_mspan_inuse_bytes":                 "Bytes of mspan structures in use.",
	"go_memstats_mspan_sys_bytes":                   "Bytes of memory obtained from the operating system for mspan structures.",
	"go_memstats_next_gc_bytes":                     "The heap size at which the next garbage collection starts.",
	"go_memstats_other_sys_bytes":                   "Bytes of memory in miscellaneous off-heap runtime allocations.",
	"go_memstats_stack_inuse_bytes":                 "Bytes of memory used by goroutine stacks.",
	"go_memstats_stack_sys_bytes":                   "Bytes of memory obtained from the operating system for goroutine stacks.",
	"go_memstats_sys_bytes":                         "Bytes of memory obtained from the operating system by the Go runtime.",
	"go_cgo_calls_count":                            "Calls into C code since start.",
	"go_cpu_count":                                  "CPU cores of the host.",
	"go_gc_duration_seconds":                        "Durations of the garbage collector's pauses.",
	"go_gc_forced_count":                            "Garbage collections forced by the program since start.",
	"go_gomaxprocs":                                 "GOMAXPROCS: the cores Go code runs on at once.",
	"go_goroutines":                                 "Goroutines now.",
	"go_threads":                                    "Operating-system threads the Go runtime created.",
	"go_info":                                       "Always 1; the label is the Go version.",
	"go_info_ext":                                   "Always 1; the labels describe the Go build.",
	"process_cpu_seconds_system_total":              "CPU time spent in the kernel for the process.",
	"process_cpu_seconds_total":                     "CPU time spent by the process, user and kernel.",
	"process_cpu_seconds_user_total":                "CPU time spent in user space by the process.",
	"process_major_pagefaults_total":                "Page faults of the process that needed a disk read.",
	"process_minor_pagefaults_total":                "Page faults of the process served without a disk read.",
	"process_num_threads":                           "Operating-system threads of the process.",
	"process_resident_memory_bytes":                 "Resident memory of the process.",
	"process_start_time_seconds":                    "When the process started, in seconds since the Unix epoch.",
	"process_virtual_memory_bytes":                  "Virtual memory of the process.",
	"process_virtual_memory_peak_bytes":             "Peak virtual memory of the process.",
	"process_resident_memory_peak_bytes":            "Peak resident memory of the process.",
	"process_resident_memory_anon_bytes":            "Resident anonymous memory of the process.",
	"process_resident_memory_file_bytes":            "Resident file-backed memory of the process.",
	"process_resident_memory_shared_bytes":          "Resident shared memory of the process.",
	"process_io_read_bytes_total":                   "Bytes the process read (any source).",
	"process_io_written_bytes_total":                "Bytes the process wrote (any destination).",
	"process_io_read_syscalls_total":                "Read system calls of the process.",
	"process_io_write_syscalls_total":               "Write system calls of the process.",
	"process_io_storage_read_bytes_total":           "Bytes the process read from storage.",
	"process_io_storage_written_bytes_total":        "Bytes the process wrote to storage.",
	"process_max_fds":                               "The most file descriptors the process may open.",
	"process_open_fds":                              "File descriptors the process has open.",
	"process_pressure_cpu_waiting_seconds_total":    "Time some of the process's tasks waited for a CPU (pressure stall information).",
	"process_pressure_cpu_stalled_seconds_total":    "Time all of the process's tasks waited for a CPU (pressure stall information).",
	"process_pressure_io_waiting_seconds_total":     "Time some of the process's tasks waited for I/O (pressure stall information).",
	"process_pressure_io_stalled_seconds_total":     "Time all of the process's tasks waited for I/O (pressure stall information).",
	"process_pressure_memory_waiting_seconds_total": "Time some of the process's tasks waited for memory (pressure stall information).",
	"process_pressure_memory_stalled_seconds_total": "Time all of the process's tasks waited for memory (pressure stall information).",
	"process_cgroup_cpu_throttled_seconds_total":    "Time the process's cgroup was throttled by its CPU limit.",
}

// libraryHelp is the HELP text of a family the library writes that help
// does not know (a newer library's): better a pointer than no text.
const libraryHelp = "Written by the VictoriaMetrics/metrics library: see its WriteProcessMetrics documentation."

// helpText returns the HELP text nxdnsd writes for family, and whether it
// is one of its own (from the help table, not the fallback).
func helpText(family string) (string, bool) {
	h, ok := help[family]
	if !ok {
		return libraryHelp, false
	}
	return h, true
}

// helpEscaper escapes a HELP text as the text format requires.
var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

// withHelp appends exp, an exposition, to out with a text on each of its
// bare "# HELP name" lines. Lines that already carry a text are kept.
func withHelp(out, exp []byte) []byte {
	const prefix = "# HELP "
	for len(exp) > 0 {
		line := exp
		if i := bytes.IndexByte(exp, '\n'); i >= 0 {
			line, exp = exp[:i+1], exp[i+1:]
		} else {
			exp = nil
		}
		name := bytes.TrimSuffix(line, []byte("\n"))
		if !bytes.HasPrefix(name, []byte(prefix)) || bytes.IndexByte(name[len(prefix):], ' ') >= 0 {
			out = append(out, line...)
			continue
		}
		text, _ := helpText(string(name[len(prefix):]))
		out = append(out, name...)
		out = append(out, ' ')
		out = append(out, helpEscaper.Replace(text)...)
		out = append(out, '\n')
	}
	return out
}
