// Command nxdnsbench is nxdnsd's end-to-end benchmark tooling, a
// development tool that nxdnsd never imports:
//
//	nxdnsbench run  [flags]   the whole benchmark: throughput against a fake
//	                          upstream, through nxdnsd and through dnsdist
//	                          (dnsperf), forwarding and cache hits, each with
//	                          the forwarder's CPU per query; latency
//	                          percentiles, four fault bursts; one report;
//	                          -dot adds a run with DNS-over-TLS upstreams
//	nxdnsbench fake [flags]   a fast fake upstream on UDP and TCP; SIGUSR1
//	                          switches it to blackhole, SIGUSR2 back to answer
//	nxdnsbench load [flags]   the Go load client: N queries, C in flight,
//	                          answers by rcode, timeouts, percentiles
//
// Everything it starts listens and sends on loopback only, and every child
// process is killed when it exits. `nxdnsbench CMD -h` lists the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/load"
)

const usage = `usage: nxdnsbench run|fake|load [flags]   (nxdnsbench CMD -h for the flags)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintf(os.Stderr, "nxdnsbench: %v\n", err)
		os.Exit(1)
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "fake":
		return fakeCmd(ctx, args[1:], stdout, stderr)
	case "load":
		return loadCmd(ctx, args[1:], stdout, stderr)
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}

// fakeCmd serves a fake upstream until ctx is done.
func fakeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nxdnsbench fake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:5300", "IP:PORT to serve on, UDP and TCP")
	modeFlag := fs.String("mode", "answer", "answer, blackhole, refuse or delay=DURATION")
	sockets := fs.Int("sockets", 0, "UDP sockets on the port with SO_REUSEPORT (0: one per CPU)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mode, err := fake.ParseMode(*modeFlag)
	if err != nil {
		return err
	}
	s, err := fake.Start(fake.Config{Addr: *listen, Mode: mode, Sockets: *sockets})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(stdout, "fake upstream on %s (udp, tcp), mode %s\n", s.Addr(), mode)

	flip := make(chan os.Signal, 1)
	signal.Notify(flip, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(flip)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "%+v\n", s.Stats())
			return nil
		case sig := <-flip:
			m := fake.Mode{Kind: fake.Answer}
			if sig == syscall.SIGUSR1 {
				m = fake.Mode{Kind: fake.Blackhole}
			}
			s.SetMode(m)
			fmt.Fprintf(stdout, "mode %s\n", m)
		}
	}
}

// loadCmd runs the load client once and prints what it saw.
func loadCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nxdnsbench load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "127.0.0.1:5353", "UDP IP:PORT to query")
	n := fs.Int("n", 2000, "queries to send (0: until -duration)")
	c := fs.Int("c", 200, "queries in flight")
	timeout := fs.Duration("timeout", 5*time.Second, "per-query timeout")
	duration := fs.Duration("duration", 0, "stop sending after this long (0: after -n)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ap, err := netip.ParseAddrPort(*server)
	if err != nil {
		return fmt.Errorf("-server: %w", err)
	}
	res, err := load.Run(ctx, load.Config{
		Server: ap, Queries: *n, InFlight: *c, Timeout: *timeout, Duration: *duration, Prefix: "l",
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sent %d, answered %d (NOERROR %d, SERVFAIL %d, REFUSED %d), timeouts %d, errors %d, unsent %d in %v: %.0f answers/s\n",
		res.Sent, res.Answered(), res.Rcodes[0], res.Rcodes[2], res.Rcodes[5], res.Timeouts, res.Errors, res.Unsent,
		res.Elapsed.Round(time.Millisecond), res.QPS())
	fmt.Fprintf(stdout, "latency mean %v p50 %v p95 %v p99 %v max %v\n",
		ms(res.Mean()), ms(res.Percentile(0.5)), ms(res.Percentile(0.95)), ms(res.Percentile(0.99)), ms(res.Percentile(1)))
	return nil
}
