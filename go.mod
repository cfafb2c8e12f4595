module github.com/nxdnsd/nxdnsd

go 1.26

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/VictoriaMetrics/metrics v1.45.0 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
