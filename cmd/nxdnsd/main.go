// Command nxdnsd is a DNS forwarder for home and edge networks.
//
//	nxdnsd                    run on the embedded default configuration
//	nxdnsd -c FILE            run with the TOML configuration FILE
//	nxdnsd -c FILE -check     validate only: exit 0 when valid, else 2
//	nxdnsd -version           print the version
//	nxdnsd -hash-password     read a password from stdin, print its hash
//	nxdnsd -h                 print the usage
//
// SIGINT and SIGTERM stop it gracefully; SIGHUP reloads the configuration
// file; SIGUSR1 reopens the query log file, for logrotate. Under systemd
// (Type=notify) it says when it is ready, reloading and stopping, and
// its log lines carry their syslog priority for journald.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/daemon"
	"github.com/nxdnsd/nxdnsd/internal/sdnotify"
)

// version and commit are set at build time with
// -ldflags "-X main.version=… -X main.commit=…" (go tool task release
// stamps internal/version's version and the commit hash). A plain go build
// leaves both empty: version is then made by the same rule from what the
// Go toolchain recorded (version.go), and -version reports the commit it
// recorded, if any.
var (
	version = ""
	commit  = ""
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // could not start or serve
	exitConfig = 2 // the configuration is invalid; every problem was printed
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole program: flags, configuration, logger, daemon. It
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nxdnsd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below: -h to stdout, a mistake to stderr
	path := fs.String("c", "", "TOML configuration `file` (default: the embedded default)")
	check := fs.Bool("check", false, "validate the configuration and exit: 0 when valid, 2 otherwise")
	showVersion := fs.Bool("version", false, "print the version and exit")
	hashPw := fs.Bool("hash-password", false, "read a password (or an API token) from standard input, print its hash for admin.password_hash (or admin.tokens) and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs, stdout)
			return exitOK
		}
		usage(fs, stderr)
		return exitConfig
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "nxdnsd: unexpected arguments: %v\n", fs.Args())
		return exitConfig
	}
	if *showVersion {
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	}
	if *hashPw {
		return hashPassword(os.Stdin, stdout, stderr)
	}

	cfg, err := loadConfig(*path)
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			for _, p := range ps {
				fmt.Fprintln(stderr, p.String())
			}
		} else {
			// A file that cannot be read: config.Load's error already
			// says "config: ", which is said once.
			fmt.Fprintln(stderr, "config: "+strings.TrimPrefix(err.Error(), "config: "))
		}
		return exitConfig
	}
	warnings := cfg.Warnings()
	if *check {
		// One line on success, as unbound-checkconf and nginx -t say
		// theirs; the warnings on stderr beside the problems' lines.
		for _, w := range warnings {
			fmt.Fprintln(stderr, w.String())
		}
		fmt.Fprintln(stdout, checkedLine(*path, cfg, len(warnings)))
		return exitOK
	}

	// From here SIGHUP reloads instead of killing the process (Go's
	// default); signals that arrive while one is handled are one.
	reload := make(chan os.Signal, 1)
	signal.Notify(reload, syscall.SIGHUP)
	defer signal.Stop(reload)
	// SIGUSR1 reopens the query log after logrotate has moved it.
	reopen := make(chan os.Signal, 1)
	signal.Notify(reopen, syscall.SIGUSR1)
	defer signal.Stop(reopen)

	log, level, err := newLogger(cfg.Log.Level, stderr, toJournal(stderr))
	if err != nil {
		fmt.Fprintf(stderr, "nxdnsd: %v\n", err)
		return exitFailed
	}
	defer log.Sync() //nolint:errcheck // stderr may not sync; nothing to do about it
	logStart(log, *path, cfg, warnings)
	notifier, err := sdnotify.New(os.Getenv("NOTIFY_SOCKET"))
	if err != nil {
		log.Warn("not telling systemd the service's state", zap.Error(err))
	}
	ro := daemon.RunOptions{Reopen: reopen, Reload: reload, Level: &level, Notifier: notifier, Version: version}
	if *path != "" {
		ro.Load = func() (*config.Config, error) { return config.Load(*path) }
	}
	if err := daemon.Run(ctx, cfg, log, ro); err != nil {
		log.Error("nxdnsd failed", zap.Error(err))
		return exitFailed
	}
	return exitOK
}

// versionLine is what -version prints: the version, the commit and the Go
// toolchain with the platform, for example
//
//	nxdnsd v0.2.0-3-g1a2b3c4 (commit 1a2b3c4…, go1.26.8, linux/arm64)
func versionLine() string {
	return fmt.Sprintf("nxdnsd %s (commit %s, %s, %s/%s)",
		version, commitHash(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// commitHash is the stamped commit, else the one go build recorded from the
// version control system (with "-dirty" for a modified tree), else
// "unknown".
func commitHash() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev + dirty
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.LoadDefault()
	}
	return config.Load(path)
}

// logStart writes the start-up log's first lines: the version and the
// configuration, the embedded default's upstreams when the file named
// none, and each warning in the words -check prints it.
func logStart(log *zap.Logger, path string, cfg *config.Config, warnings config.Problems) {
	log.Info("nxdnsd", zap.String("version", version), zap.String("config", configName(path)))
	if cfg.UpstreamsFromDefault {
		log.Info("the configuration names no upstream: using the embedded default's",
			zap.Strings("upstreams", upstreamNames(cfg)))
	}
	for _, w := range warnings {
		log.Warn(w.String(), zap.String("path", w.Path))
	}
}

// checkedLine is what -check prints when the configuration is valid.
func checkedLine(path string, cfg *config.Config, warnings int) string {
	s := "nxdnsd: the configuration " + configName(path) + " is valid"
	if cfg.UpstreamsFromDefault {
		s += " (no upstream named: the embedded default's " + strings.Join(upstreamNames(cfg), ", ") + ")"
	}
	switch warnings {
	case 0:
	case 1:
		s += ", with 1 warning"
	default:
		s += fmt.Sprintf(", with %d warnings", warnings)
	}
	return s
}

func upstreamNames(cfg *config.Config) []string {
	out := make([]string, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		out[i] = u.Name
	}
	return out
}

func configName(path string) string {
	if path == "" {
		return "(embedded default)"
	}
	return path
}

// usage prints how to run nxdnsd to w.
func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, `Usage: nxdnsd [-c FILE] [-check] [-version] [-hash-password]

nxdnsd is a DNS forwarder. Without -c it runs on the embedded default
configuration: DNS on 127.0.0.1:1053, the admin API on 127.0.0.1:8053.

`)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprint(w, `
Signals: SIGTERM or SIGINT stops it gracefully, SIGHUP reloads the -c file,
SIGUSR1 reopens the query log file.
`)
}

// newLogger returns zap's production JSON logger at level, writing to w
// (stderr: journald captures it under systemd), and the level, which a
// reload may change. With journal, each line starts with its syslog
// priority, which journald takes as the line's own.
func newLogger(level string, w io.Writer, journal bool) (*zap.Logger, zap.AtomicLevel, error) {
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, lvl, fmt.Errorf("log.level: %w", err)
	}
	cfg := zap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.ISO8601TimeEncoder
	enc := zapcore.NewJSONEncoder(cfg)
	if journal {
		enc = priorityEncoder{enc}
	}
	core := zapcore.NewCore(enc, zapcore.AddSync(w), lvl)
	// No stack trace on errors: a configuration problem, a port taken or
	// a cache that cannot be saved are the operator's to fix, and a Go
	// stack says nothing to them. A recovered panic logs its own stack
	// (server.Server); zap's DPanic and above keep theirs.
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.DPanicLevel)), lvl, nil
}
