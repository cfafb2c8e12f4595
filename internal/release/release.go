// Package release makes nxdnsd's release artefacts reproducibly: their
// names, all carrying the one version of internal/version, the packaged
// systemd unit, the .tar.gz archives, the OCI image and SHA256SUMS. cmd/nxdnsrelease drives
// it (go tool task release).
//
// Reproducible means that the same commit, Go toolchain and inputs give
// the same bytes: every timestamp is the commit's time, every owner is
// root, entries are sorted, and nothing reads the clock, the user or the
// host name.
package release

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/nxdnsd/nxdnsd/internal/version"
)

// Target is one platform the release builds nxdnsd for.
type Target struct {
	Name    string // in file names: nxdnsd-VERSION-linux-NAME.tar.gz
	GOARCH  string
	GOARM   string // "" except for arm
	DebArch string // the Debian architecture of its .deb; "" for none
	Variant string // the OCI platform's variant ("v7", "v6"); with InImage
	InImage bool   // one of the OCI image's platforms
}

// Targets are the release's platforms. The armhf package carries the
// ARMv6 build: Raspberry Pi OS's 32-bit armhf runs on the ARMv6 Pi Zero and
// Pi 1, and an ARMv6 binary runs on every ARMv7 board as well. The image
// has a platform for every archive: linux/arm/v6 is the Pi Zero's and the
// Pi 1's.
var Targets = []Target{
	{Name: "amd64", GOARCH: "amd64", DebArch: "amd64", InImage: true},
	{Name: "arm64", GOARCH: "arm64", DebArch: "arm64", InImage: true},
	{Name: "armv7", GOARCH: "arm", GOARM: "7", Variant: "v7", InImage: true},
	{Name: "armv6", GOARCH: "arm", GOARM: "6", DebArch: "armhf", Variant: "v6", InImage: true},
}

// FindTargets returns the targets named in names (comma-separated), in
// the order of Targets; "" or "all" is every target.
func FindTargets(names string) ([]Target, error) {
	if names == "" || names == "all" {
		return Targets, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(names, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var ts []Target
	for _, t := range Targets {
		if want[t.Name] {
			ts = append(ts, t)
			delete(want, t.Name)
		}
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		return nil, fmt.Errorf("unknown targets %q: want some of amd64, arm64, armv7, armv6", unknown)
	}
	return ts, nil
}

// The release's file names and image name, each carrying the one
// version v (internal/version) as it is.

// ArchiveDir is the folder in t's archive, and the archive's name without
// .tar.gz: nxdnsd-VERSION-linux-NAME.
func ArchiveDir(v string, t Target) string { return "nxdnsd-" + v + "-linux-" + t.Name }

// DebFile is the name of t's .deb, as dpkg-name would name it:
// nxdnsd_VERSION-1_ARCH.deb, VERSION-1 being its Version field
// (version.Debian; deploy/nfpm.yaml adds the revision).
func DebFile(v string, t Target) string {
	return "nxdnsd_" + version.Debian(v) + "_" + t.DebArch + ".deb"
}

// ImageTarFile is the image's file name: nxdnsd-VERSION-oci.tar.
func ImageTarFile(v string) string { return "nxdnsd-" + v + "-oci.tar" }

var notInTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// ImageRef is the name the image loads as: nxdnsd:VERSION. Every version
// of the scheme is a valid tag as it is; what a tag may not hold (in a
// version given by hand) is replaced by "-".
func ImageRef(v string) string {
	tag := notInTag.ReplaceAllString(v, "-")
	if len(tag) > 128 {
		tag = tag[:128]
	}
	return "nxdnsd:" + tag
}

// PackagedUnit turns deploy/nxdnsd.service (the unit for a hand install,
// running /usr/local/bin/nxdnsd) into the Debian package's: the binary is
// /usr/bin/nxdnsd, and systemd gives the service a state directory,
// /var/lib/nxdnsd, for the answer cache's file. Everything else, the
// sandboxing above all, stays as it is. It fails when the source no longer
// has what it edits, so that the two units cannot drift apart silently.
func PackagedUnit(src []byte) ([]byte, error) {
	const (
		execOld = "ExecStart=/usr/local/bin/nxdnsd "
		execNew = "ExecStart=/usr/bin/nxdnsd "
		logs    = "\nLogsDirectory=nxdnsd\n"
		state   = "\nLogsDirectory=nxdnsd\nStateDirectory=nxdnsd\n"
	)
	i := bytes.Index(src, []byte("\n[Unit]\n"))
	if i < 0 {
		return nil, fmt.Errorf("the unit has no [Unit] section")
	}
	body := string(src[i+1:])
	for _, s := range []string{execOld, logs} {
		if n := strings.Count(body, s); n != 1 {
			return nil, fmt.Errorf("the unit has %q %d times, want once", strings.TrimSpace(s), n)
		}
	}
	if strings.Contains(body, "StateDirectory=") {
		return nil, fmt.Errorf("the unit already has a StateDirectory=: update PackagedUnit")
	}
	body = strings.Replace(body, execOld, execNew, 1)
	body = strings.Replace(body, logs, state, 1)
	if strings.Contains(body, "/usr/local/") {
		return nil, fmt.Errorf("the packaged unit still names /usr/local/")
	}
	head := `# systemd unit for nxdnsd, as the Debian package installs it: the binary is
# /usr/bin/nxdnsd, the configuration /etc/nxdnsd/nxdns.toml (a conffile),
# the state directory /var/lib/nxdnsd. Made from deploy/nxdnsd.service by
# the release. To change a setting, do not edit this file (an upgrade
# replaces it): systemctl edit nxdnsd
# Logs go to journald: journalctl -u nxdnsd -o cat | jq
`
	return []byte(head + body), nil
}
