// Command nxdnsrelease writes nxdnsd's release into dist/ (go tool task
// release):
//
//   - nxdnsd-VERSION-linux-{amd64,arm64,armv7,armv6}.tar.gz: the static
//     binary, the systemd unit, the example configuration, install.md, the
//     LICENSE and the licences of the Go modules linked in;
//   - nxdnsd_VERSION-1_{amd64,arm64,armhf}.deb, made by nfpm (a Go tool
//     of this module) from deploy/nfpm.yaml;
//   - nxdnsd-VERSION-oci.tar: a multi-platform OCI image (amd64, arm64,
//     arm/v7, arm/v6) from scratch, as an OCI layout in a tar, made here with
//     go-containerregistry: no Docker daemon, no registry;
//   - SHA256SUMS.
//
// VERSION is the one version of internal/version, from the last release
// tag (vX.Y.Z) or the commit: 1.2.3, 1.2.3-4-gabc1234, 0.0.0-206-g4750ec4,
// with -dirty for uncommitted changes. The archives, the .deb (VERSION-1),
// the image's tag and labels, and the binary's -version (stamped with the
// commit) all carry that one string. Everything is reproducible: the builds are static
// (CGO_ENABLED=0), -trimpath, without VCS stamping or build time, and every
// timestamp in the archives, packages and image is the commit's time
// (SOURCE_DATE_EPOCH), so two runs on one commit give the same bytes.
//
//	go run ./cmd/nxdnsrelease [-o dist] [-targets amd64,arm64,armv7,armv6] [-deb=false] [-image=false]
//	go run ./cmd/nxdnsrelease -print-version   (what go tool task build stamps)
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nxdnsd/nxdnsd/internal/release"
	"github.com/nxdnsd/nxdnsd/internal/version"
)

const source = "https://github.com/nxdnsd/nxdnsd"

func main() {
	out := flag.String("o", "dist", "output `folder`; its earlier release files are replaced")
	targets := flag.String("targets", "all", "comma-separated `targets`: amd64, arm64, armv7, armv6 (all by default)")
	debs := flag.Bool("deb", true, "build the Debian packages (amd64, arm64 and armhf, where those targets are built)")
	image := flag.Bool("image", true, "build the OCI image (amd64, arm64, arm/v7 and arm/v6, where those targets are built)")
	ca := flag.String("ca", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates (PEM) to put in the image")
	version := flag.String("version", "", "the version to stamp, as git describe prints it or in the scheme (default: from the last release tag or the commit)")
	printVersion := flag.Bool("print-version", false, "print the version and exit")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *printVersion {
		v, err := gitVersion(*version)
		if err != nil {
			fmt.Fprintf(os.Stderr, "nxdnsrelease: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(v)
		return
	}
	ts, err := release.FindTargets(*targets)
	if err == nil {
		err = run(*out, ts, *debs, *image, *ca, *version)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nxdnsrelease: %v\n", err)
		os.Exit(1)
	}
}

// info is what the release stamps.
type info struct {
	version, commit string    // version: internal/version's
	time            time.Time // the commit's, or SOURCE_DATE_EPOCH
}

func run(out string, ts []release.Target, debs, image bool, caPath, version string) error {
	start := time.Now()
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	in, err := gitInfo(version)
	if err != nil {
		return err
	}
	fmt.Printf("nxdnsd %s (commit %s), time %s\n", in.version, in.commit, in.time.Format(time.RFC3339))

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := cleanOut(out); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "nxdnsrelease-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// The binaries.
	bins := map[string][]byte{}
	for _, t := range ts {
		t0 := time.Now()
		bin := filepath.Join(work, t.Name, "nxdnsd")
		if err := build(t, in, bin); err != nil {
			return err
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		bins[t.Name] = b
		fmt.Printf("built linux/%s in %.1f s: %d bytes\n", t.Name, time.Since(t0).Seconds(), len(b))
	}

	licence, err := os.ReadFile("LICENSE")
	if err != nil {
		return err
	}
	third, err := thirdPartyLicences(ts)
	if err != nil {
		return err
	}
	thirdPath := filepath.Join(work, "THIRD_PARTY_LICENSES")
	if err := os.WriteFile(thirdPath, third, 0o644); err != nil {
		return err
	}
	unit, err := os.ReadFile("deploy/nxdnsd.service")
	if err != nil {
		return err
	}
	config, err := os.ReadFile("deploy/nxdns.toml")
	if err != nil {
		return err
	}
	install, err := os.ReadFile("docs/install.md")
	if err != nil {
		return err
	}

	// The archives.
	for _, t := range ts {
		dir := release.ArchiveDir(in.version, t)
		tgz, err := release.TarGz([]release.File{
			{Name: dir + "/nxdnsd", Mode: 0o755, Data: bins[t.Name]},
			{Name: dir + "/nxdnsd.service", Mode: 0o644, Data: unit},
			{Name: dir + "/nxdns.toml", Mode: 0o644, Data: config},
			{Name: dir + "/install.md", Mode: 0o644, Data: install},
			{Name: dir + "/LICENSE", Mode: 0o644, Data: licence},
			{Name: dir + "/THIRD_PARTY_LICENSES", Mode: 0o644, Data: third},
		}, in.time)
		if err != nil {
			return err
		}
		if err := writeOut(out, dir+".tar.gz", tgz); err != nil {
			return err
		}
	}

	// The Debian packages.
	if debs {
		packaged, err := release.PackagedUnit(unit)
		if err != nil {
			return fmt.Errorf("deploy/nxdnsd.service: %w", err)
		}
		unitPath := filepath.Join(work, "nxdnsd.service")
		if err := os.WriteFile(unitPath, packaged, 0o644); err != nil {
			return err
		}
		for _, t := range ts {
			if t.DebArch == "" {
				continue
			}
			t0 := time.Now()
			cmd := exec.Command("go", "tool", "nfpm", "package", "--config", "deploy/nfpm.yaml", "--packager", "deb",
				"--target", filepath.Join(out, release.DebFile(in.version, t)))
			cmd.Env = append(os.Environ(),
				"NXDNSD_VERSION="+in.version,
				"NXDNSD_DEB_ARCH="+t.DebArch,
				"NXDNSD_BIN="+filepath.Join(work, t.Name, "nxdnsd"),
				"NXDNSD_UNIT="+unitPath,
				"NXDNSD_LICENSES="+thirdPath,
				"SOURCE_DATE_EPOCH="+strconv.FormatInt(in.time.Unix(), 10),
			)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("nfpm (%s): %w", t.DebArch, err)
			}
			fmt.Printf("packaged %s in %.1f s\n", t.DebArch, time.Since(t0).Seconds())
		}
	}

	// The OCI image.
	if image && slices.ContainsFunc(ts, func(t release.Target) bool { return t.InImage }) {
		t0 := time.Now()
		cas, err := os.ReadFile(caPath)
		if err != nil {
			return fmt.Errorf("the image's CA certificates: %w", err)
		}
		if !bytes.Contains(cas, []byte("-----BEGIN CERTIFICATE-----")) {
			return fmt.Errorf("%s: no PEM certificate in it", caPath)
		}
		ociConfig, err := os.ReadFile("deploy/oci/nxdns.toml")
		if err != nil {
			return err
		}
		idx, err := release.BuildImage(release.ImageSpec{
			Version: in.version, Commit: in.commit, Created: in.time, Source: source,
			Base: release.ImageBase(cas, ociConfig, map[string][]byte{
				"LICENSE": licence, "THIRD_PARTY_LICENSES": third,
			}),
			Binaries: bins,
			Targets:  ts,
		})
		if err != nil {
			return err
		}
		var tarball bytes.Buffer
		if err := release.WriteImageTar(&tarball, idx, release.ImageRef(in.version), in.time); err != nil {
			return err
		}
		if err := writeOut(out, release.ImageTarFile(in.version), tarball.Bytes()); err != nil {
			return err
		}
		fmt.Printf("image %s in %.1f s\n", release.ImageRef(in.version), time.Since(t0).Seconds())
	}

	sums, err := release.WriteSums(out)
	if err != nil {
		return err
	}
	fmt.Printf("\n%s/SHA256SUMS:\n%s", out, sums)
	des, _ := os.ReadDir(out)
	for _, de := range des {
		if fi, err := de.Info(); err == nil && fi.Mode().IsRegular() {
			fmt.Printf("%10d  %s\n", fi.Size(), de.Name())
		}
	}
	fmt.Printf("release written to %s/ in %.1f s\n", out, time.Since(start).Seconds())
	return nil
}

func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the nxdnsd module")
	}
	return filepath.Dir(mod), nil
}

func git(args ...string) (string, error) {
	b, err := exec.Command("git", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// gitVersion is the release's version (internal/version): from given, as
// git describe prints it or in the scheme, or else from git.
func gitVersion(given string) (string, error) {
	describe := given
	if describe == "" {
		var err error
		if describe, err = git(version.DescribeArgs...); err != nil {
			return "", err
		}
	}
	count, err := git("rev-list", "--count", "HEAD")
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return "", fmt.Errorf("git rev-list --count HEAD: %q", count)
	}
	return version.FromGit(describe, n)
}

func gitInfo(given string) (info, error) {
	var in info
	var err error
	if in.commit, err = git("rev-parse", "HEAD"); err != nil {
		return in, err
	}
	if in.version, err = gitVersion(given); err != nil {
		return in, err
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct"); err != nil {
			return in, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return in, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	in.time = time.Unix(sec, 0).UTC()
	return in, nil
}

// build compiles a static, reproducible nxdnsd for t.
func build(t release.Target, in info, bin string) error {
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", in.version, in.commit)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, "./cmd/nxdnsd")
	cmd.Env = append(os.Environ(), targetEnv(t)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build linux/%s: %w", t.Name, err)
	}
	return nil
}

func targetEnv(t release.Target) []string {
	// GOFLAGS from the caller (-race, -cover) would change the binary.
	return []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + t.GOARCH, "GOARM=" + t.GOARM, "GOFLAGS=-mod=readonly"}
}

// thirdPartyLicences is the licence texts of Go and of every module linked
// into nxdnsd on the targets: BSD- and MIT-style licences ask for their
// notice with every binary copy.
func thirdPartyLicences(ts []release.Target) ([]byte, error) {
	mods := map[string]string{} // path@version → folder
	for _, t := range ts {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}} {{.Dir}}{{end}}{{end}}", "./cmd/nxdnsd")
		cmd.Env = append(os.Environ(), targetEnv(t)...)
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if mod, dir, ok := strings.Cut(line, " "); ok {
				mods[mod] = dir
			}
		}
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString("nxdnsd is built with Go and links in the Go modules below. Their licences follow.\n")
	add := func(name, dir string) error {
		texts, err := licenceFiles(dir)
		if err != nil {
			return err
		}
		if len(texts) == 0 {
			return fmt.Errorf("%s: no licence file in %s", name, dir)
		}
		for _, f := range texts {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return err
			}
			fmt.Fprintf(&buf, "\n================================================================================\n%s: %s\n\n", name, f)
			buf.Write(bytes.TrimRight(b, "\n"))
			buf.WriteString("\n")
		}
		return nil
	}
	if err := add("Go (the standard library and runtime)", strings.TrimSpace(string(goroot))); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(mods))
	for m := range mods {
		names = append(names, m)
	}
	slices.Sort(names)
	for _, m := range names {
		if err := add(m, mods[m]); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

var licenceName = regexp.MustCompile(`(?i)^(LICEN[CS]E|COPYING|NOTICE)([.-].*)?$`)

// licenceFiles names the licence and notice files at the top of dir.
func licenceFiles(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, de := range des {
		if de.Type().IsRegular() && licenceName.MatchString(de.Name()) {
			names = append(names, de.Name())
		}
	}
	return names, nil
}

// cleanOut removes the release files of an earlier run from out, and
// nothing else.
func cleanOut(out string) error {
	return filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == out {
				return nil
			}
			return filepath.SkipDir
		}
		n := d.Name()
		if n == "SHA256SUMS" || strings.HasPrefix(n, "nxdnsd-") || (strings.HasPrefix(n, "nxdnsd_") && strings.HasSuffix(n, ".deb")) {
			return os.Remove(p)
		}
		return nil
	})
}

func writeOut(out, name string, b []byte) error {
	return os.WriteFile(filepath.Join(out, name), b, 0o644)
}
