package release

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: unprivileged, with no home and no shell (the image has
// none). 65532 is the usual "nonroot" of distroless images.
const (
	ImageUID  = 65532
	ImageUser = "65532:65532"
)

// Paths in the image.
const (
	ImageBinary = "usr/bin/nxdnsd"
	ImageConfig = "etc/nxdnsd/nxdns.toml"
	ImageCAs    = "etc/ssl/certs/ca-certificates.crt"
)

// ImageSpec is what the OCI image is made of.
type ImageSpec struct {
	Version, Commit string
	Created         time.Time // the commit's time, for reproducibility
	Source          string    // the project's address, for the labels
	// Base is the first layer, the same on every platform: the CA
	// certificates, the configuration, /etc/passwd and the licences.
	Base []File
	// Binaries are the static nxdnsd builds by Target.Name; the image has
	// a platform for each target with InImage.
	Binaries map[string][]byte
	Targets  []Target
}

// ImageBase returns the base layer's files: the CA bundle (PEM), the
// image's configuration, the passwd and group entries of root and the
// unprivileged user, and the licence texts under usr/share/doc/nxdnsd.
func ImageBase(caBundle, config []byte, licences map[string][]byte) []File {
	files := []File{
		{Name: ImageCAs, Mode: 0o644, Data: caBundle},
		{Name: ImageConfig, Mode: 0o644, Data: config},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnxdnsd:x:%d:%d:nxdnsd:/nonexistent:/sbin/nologin\n", ImageUID, ImageUID))},
		{Name: "etc/group", Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:\nnxdnsd:x:%d:\n", ImageUID))},
	}
	for name, text := range licences {
		files = append(files, File{Name: "usr/share/doc/nxdnsd/" + name, Mode: 0o644, Data: text})
	}
	return files
}

// layer makes an OCI layer of files; the gzip is ours, so its bytes are
// reproducible.
func layer(files []File, mtime time.Time) (v1.Layer, error) {
	tgz, err := TarGz(files, mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tgz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// BuildImage returns the multi-platform image index: for each target with
// InImage, an image from scratch with the base layer and the binary's
// layer, running nxdnsd as ImageUser with the configuration in
// /etc/nxdnsd.
func BuildImage(spec ImageSpec) (v1.ImageIndex, error) {
	created := v1.Time{Time: spec.Created.UTC().Truncate(time.Second)}
	base, err := layer(spec.Base, spec.Created)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "nxdnsd",
		"org.opencontainers.image.description": "DNS forwarder for home and edge networks",
		"org.opencontainers.image.version":     spec.Version,
		"org.opencontainers.image.revision":    spec.Commit,
		"org.opencontainers.image.source":      spec.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, t := range spec.Targets {
		if !t.InImage {
			continue
		}
		bin, ok := spec.Binaries[t.Name]
		if !ok {
			return nil, fmt.Errorf("image: no binary for %s", t.Name)
		}
		binLayer, err := layer([]File{{Name: ImageBinary, Mode: 0o755, Data: bin}}, spec.Created)
		if err != nil {
			return nil, err
		}
		cfg := &v1.ConfigFile{
			Architecture: t.GOARCH,
			OS:           "linux",
			Variant:      t.Variant,
			Created:      created,
			Config: v1.Config{
				Entrypoint: []string{"/" + ImageBinary},
				Cmd:        []string{"-c", "/" + ImageConfig},
				User:       ImageUser,
				WorkingDir: "/",
				Env:        []string{"PATH=/usr/bin"},
				ExposedPorts: map[string]struct{}{
					"1053/udp": {}, "1053/tcp": {}, "8053/tcp": {},
				},
				Labels:     labels,
				StopSignal: "SIGTERM",
			},
			RootFS: v1.RootFS{Type: "layers"},
		}
		img, err := mutate.ConfigFile(mutate.MediaType(empty.Image, types.OCIManifestSchema1), cfg)
		if err != nil {
			return nil, err
		}
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "nxdnsrelease: CA certificates, /etc/nxdnsd/nxdns.toml, /etc/passwd, licences"}},
			mutate.Addendum{Layer: binLayer, History: v1.History{Created: created, CreatedBy: "nxdnsrelease: /usr/bin/nxdnsd " + spec.Version}},
		)
		if err != nil {
			return nil, err
		}
		img = mutate.Annotations(img, map[string]string{
			"org.opencontainers.image.version":  spec.Version,
			"org.opencontainers.image.revision": spec.Commit,
			"org.opencontainers.image.source":   spec.Source,
			"org.opencontainers.image.created":  created.Format(time.RFC3339),
		}).(v1.Image)
		adds = append(adds, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{
				OS: "linux", Architecture: t.GOARCH, Variant: t.Variant,
			}},
		})
	}
	if len(adds) == 0 {
		return nil, fmt.Errorf("image: no target is in the image")
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// WriteImageTar writes idx as an OCI image layout, packed in a tar stream
// (what podman load, skopeo's oci-archive: and docker load since 25 read),
// named ref (org.opencontainers.image.ref.name, say "nxdnsd:v0.2.0"). The
// tar is reproducible like every archive here.
func WriteImageTar(w io.Writer, idx v1.ImageIndex, ref string, mtime time.Time) error {
	dir, err := os.MkdirTemp("", "nxdnsd-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	})); err != nil {
		return err
	}
	var files []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, File{Name: filepath.ToSlash(rel), Mode: 0o644, Data: b})
		return nil
	})
	if err != nil {
		return err
	}
	return Tar(w, files, mtime)
}
