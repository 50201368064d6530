// Package ociimage packs static binaries into single-layer OCI images without
// Docker or a registry, reproducibly: the layer's entries are sorted and owned
// by root, every time in the image is the one given (or zero), so the same
// files give the same digest. hack/cluster/image (the local cluster's images)
// and hack/release (the published multi-arch images) both build on it.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one file of the image, written with mode 0755.
type File struct {
	// Path is the file's absolute path in the image.
	Path string
	// Source is the file on this machine.
	Source string
}

// Config describes an image.
type Config struct {
	// Platform is the image's; OS defaults to linux.
	Platform v1.Platform
	Files    []File
	// Entrypoint defaults to the first file.
	Entrypoint []string
	User       string
	WorkingDir string
	Env        []string
	Labels     map[string]string
	// StopSignal is what the runtime stops the container with (empty:
	// SIGTERM), as a Dockerfile's STOPSIGNAL.
	StopSignal string
	// Created stamps the layer's files, the config and its history. The zero
	// time leaves them zero (the local cluster's images).
	Created time.Time
}

// Image builds the image of c.
func Image(c Config) (v1.Image, error) {
	if len(c.Files) == 0 {
		return nil, fmt.Errorf("an image needs at least one file")
	}
	layer, err := Layer(c.Files, c.Created)
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: c.Created}},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = c.Platform.OS, c.Platform.Architecture, c.Platform.Variant
	if cf.OS == "" {
		cf.OS = "linux"
	}
	cf.Created = v1.Time{Time: c.Created}
	entrypoint := c.Entrypoint
	if len(entrypoint) == 0 {
		entrypoint = []string{path.Clean(c.Files[0].Path)}
	}
	cf.Config = v1.Config{
		Entrypoint: entrypoint,
		User:       c.User,
		WorkingDir: c.WorkingDir,
		Env:        c.Env,
		Labels:     c.Labels,
		StopSignal: c.StopSignal,
	}
	return mutate.ConfigFile(img, cf)
}

// Layer builds a gzip-compressed OCI layer holding files, each with mode
// 0755, owned by root and stamped with mtime, with the parent directories
// they need, in path order.
func Layer(files []File, mtime time.Time) (v1.Layer, error) {
	data, err := layerTar(files, mtime)
	if err != nil {
		return nil, err
	}
	// Compressed once: the digest and every write of the layer read it.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func layerTar(files []File, mtime time.Time) ([]byte, error) {
	sorted := make([]File, 0, len(files))
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "/") {
			return nil, fmt.Errorf("image path %q is not absolute", f.Path)
		}
		sorted = append(sorted, File{Path: path.Clean(f.Path), Source: f.Source})
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range sorted {
		var parents []string
		for d := path.Dir(f.Path); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: 0o755, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// zeroTime stamps every file of a layout tarball, for reproducibility.
var zeroTime = time.Unix(0, 0)

// WriteLayoutTarball writes img as an OCI image layout, annotated with its
// full reference (containerd's import reads io.containerd.image.name), and
// tars the layout into out atomically.
func WriteLayoutTarball(out string, tag name.Tag, img v1.Image) error {
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	})); err != nil {
		return err
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		hdr.Mode = 0o644
		if d.IsDir() {
			hdr.Name += "/"
			hdr.Mode = 0o755
		}
		hdr.ModTime, hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = zeroTime, "", "", 0, 0
		// FileInfoHeader copies the access and change times, which PAX keeps.
		hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}
