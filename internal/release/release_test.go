package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/nxdnsd/nxdnsd/internal/version"
)

// One version everywhere (issue 24: the .deb said 0.0.0~git.206.g4750ec4-1,
// the archives and the image 4750ec4): for the same git describe, the
// archive's name and folder, the .deb's name and Version field (through
// deploy/nfpm.yaml), the image's file, tag, labels and annotations all
// carry the one string internal/version makes. Before, the .deb's
// version came from DebVersion ("0.0.0~git.206.g4750ec4") and the others
// from the raw describe ("4750ec4").
func TestOneVersionEverywhere(t *testing.T) {
	nfpm, err := os.ReadFile("../../deploy/nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// nfpm writes the Version field as version-release, verbatim.
	for _, want := range []string{"\nversion: ${NXDNSD_VERSION}\n", "\nversion_schema: none\n", "\nrelease: \"1\"\n"} {
		if !strings.Contains(string(nfpm), want) {
			t.Errorf("deploy/nfpm.yaml lacks %q", strings.TrimSpace(want))
		}
	}
	amd64, armv6 := Targets[0], Targets[3]
	for _, describe := range []string{"4750ec4", "4750ec4-dirty", "v0.3.0", "v0.3.0-2-gabc1234"} {
		v, err := version.FromGit(describe, 206)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ got, want string }{
			{ArchiveDir(v, amd64), "nxdnsd-" + v + "-linux-amd64"},
			{DebFile(v, amd64), "nxdnsd_" + v + "-1_amd64.deb"},
			{DebFile(v, armv6), "nxdnsd_" + v + "-1_armhf.deb"},
			{version.Debian(v), v + "-1"},
			{ImageTarFile(v), "nxdnsd-" + v + "-oci.tar"},
			{ImageRef(v), "nxdnsd:" + v},
		} {
			if c.got != c.want {
				t.Errorf("%s: %q, want %q", describe, c.got, c.want)
			}
		}
	}
	// The image's labels and annotations: testImage builds with
	// Version "v1.2.3" as given; here the scheme's.
	v, _ := version.FromGit("4750ec4", 206)
	spec := ImageSpec{Version: v, Commit: "4750ec4", Created: time.Unix(0, 0), Targets: Targets[:1],
		Binaries: map[string][]byte{"amd64": []byte("binary")}}
	idx, err := BuildImage(spec)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != v {
		t.Errorf("image label version %q, want %q", got, v)
	}
	if got := m.Annotations["org.opencontainers.image.version"]; got != v {
		t.Errorf("image annotation version %q, want %q", got, v)
	}
}

func TestFindTargets(t *testing.T) {
	ts, err := FindTargets("armv6,amd64")
	if err != nil || len(ts) != 2 || ts[0].Name != "amd64" || ts[1].Name != "armv6" {
		t.Errorf("FindTargets = %v, %v", ts, err)
	}
	if ts, _ := FindTargets(""); len(ts) != len(Targets) {
		t.Errorf("FindTargets(\"\") = %d targets, want all %d", len(ts), len(Targets))
	}
	if _, err := FindTargets("amd64,sparc"); err == nil {
		t.Error("FindTargets accepted sparc")
	}
}

// The packaged unit is the hand-install unit with one edit, the binary's
// path: every other line, the sandboxing and the state directory above
// all, is kept.
func TestPackagedUnit(t *testing.T) {
	src, err := os.ReadFile("../../deploy/nxdnsd.service")
	if err != nil {
		t.Fatal(err)
	}
	got, err := PackagedUnit(src)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(got)
	for _, want := range []string{
		"\nExecStart=/usr/bin/nxdnsd -c /etc/nxdnsd/nxdns.toml\n",
		"\nStateDirectory=nxdnsd\n",
		"\nDynamicUser=yes\n",
		"\nProtectSystem=strict\n",
		"\nWantedBy=multi-user.target\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("the packaged unit lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(unit, "/usr/local") {
		t.Error("the packaged unit still names /usr/local")
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(unit, "\n") {
		lines[l] = true
	}
	body := string(src[bytes.Index(src, []byte("[Unit]")):])
	for _, l := range strings.Split(body, "\n") {
		if !lines[l] && !strings.HasPrefix(l, "ExecStart=") {
			t.Errorf("the packaged unit lost %q", l)
		}
	}
	if _, err := PackagedUnit([]byte("[Unit]\nDescription=x\n")); err == nil {
		t.Error("PackagedUnit accepted a unit without ExecStart")
	}
	noState := strings.Replace(string(src), "\nStateDirectory=nxdnsd\n", "\n", 1)
	if _, err := PackagedUnit([]byte(noState)); err == nil {
		t.Error("PackagedUnit accepted a unit without StateDirectory=nxdnsd")
	}
}

func readTar(t *testing.T, r io.Reader) []*tar.Header {
	t.Helper()
	var hs []*tar.Header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
}

func TestTarGzReproducible(t *testing.T) {
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	files := []File{
		{Name: "d/nxdnsd", Mode: 0o755, Data: []byte("binary")},
		{Name: "d/LICENSE", Mode: 0o644, Data: []byte("licence")},
		{Name: "d/sub/nxdns.toml", Mode: 0o644, Data: []byte("[server]\n")},
	}
	a, err := TarGz(files, mtime)
	if err != nil {
		t.Fatal(err)
	}
	reversed := []File{files[2], files[1], files[0]}
	b, err := TarGz(reversed, mtime.Add(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same files in another order give other bytes")
	}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header has time %v, name %q", zr.ModTime, zr.Name)
	}
	var names []string
	for _, h := range readTar(t, zr) {
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(mtime) {
			t.Errorf("%s: uid %d gid %d time %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Name == "d/nxdnsd" && h.Mode != 0o755 {
			t.Errorf("d/nxdnsd mode %o", h.Mode)
		}
	}
	want := "d/ d/LICENSE d/nxdnsd d/sub/ d/sub/nxdns.toml"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("entries %q, want %q", got, want)
	}
	if _, err := TarGz([]File{{Name: "../x"}}, mtime); err == nil {
		t.Error("TarGz accepted ../x")
	}
	if _, err := TarGz([]File{{Name: "a"}, {Name: "a/b"}}, mtime); err == nil {
		t.Error("TarGz accepted a as a file and a folder")
	}
}

func TestWriteSums(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.deb"), []byte("b"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.tar.gz"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte("old"), 0o644)
	sums, err := WriteSums(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  a.tar.gz\n" +
		"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.deb\n"
	if string(sums) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", sums, want)
	}
}

func testImage(t *testing.T) (ImageSpec, []byte) {
	t.Helper()
	spec := ImageSpec{
		Version: "v1.2.3", Commit: "abc", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Source: "https://example.invalid/nxdnsd",
		Base: ImageBase([]byte("-----BEGIN CERTIFICATE-----\n"), []byte("[server]\n"),
			map[string][]byte{"LICENSE": []byte("licence")}),
		Binaries: map[string][]byte{},
		Targets:  Targets,
	}
	for _, tg := range Targets {
		spec.Binaries[tg.Name] = []byte("binary for " + tg.Name)
	}
	idx, err := BuildImage(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteImageTar(&out, idx, "nxdnsd:v1.2.3", spec.Created); err != nil {
		t.Fatal(err)
	}
	return spec, out.Bytes()
}

// The image: one index, a platform per image target, each from scratch
// with the base layer and its binary, run as the unprivileged user; and
// two builds give the same tar.
func TestImage(t *testing.T) {
	_, a := testImage(t)
	_, b := testImage(t)
	if !bytes.Equal(a, b) {
		t.Fatal("two image builds differ")
	}

	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var top v1.IndexManifest
	raw, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "nxdnsd:v1.2.3" {
		t.Fatalf("index.json: %s", raw)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	multi, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := multi.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != ImageUser || c.Entrypoint[0] != "/usr/bin/nxdnsd" || strings.Join(c.Cmd, " ") != "-c /etc/nxdnsd/nxdns.toml" {
			t.Errorf("%s: user %q entrypoint %q cmd %q", d.Platform, c.User, c.Entrypoint, c.Cmd)
		}
		if cf.Architecture != d.Platform.Architecture || cf.Variant != d.Platform.Variant {
			t.Errorf("%s: config says %s/%s", d.Platform, cf.Architecture, cf.Variant)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 2 {
			t.Fatalf("%s: %d layers, %v", d.Platform, len(layers), err)
		}
		var names []string
		for _, l := range layers {
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range readTar(t, rc) {
				names = append(names, h.Name)
			}
			rc.Close()
		}
		for _, want := range []string{ImageCAs, ImageConfig, "etc/passwd", ImageBinary, "usr/share/doc/nxdnsd/LICENSE"} {
			if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
				t.Errorf("%s: no %s in %q", d.Platform, want, names)
			}
		}
	}
	// Every archive's platform, the ARMv6 Pi Zero and Pi 1 included (issue 24).
	if got := strings.Join(platforms, " "); got != "linux/amd64 linux/arm64 linux/arm/v7 linux/arm/v6" {
		t.Errorf("platforms %q, want linux/amd64 linux/arm64 linux/arm/v7 linux/arm/v6", got)
	}
}
