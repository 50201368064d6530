// Command image packs static binaries into a single-layer OCI image and
// writes it as an OCI image-layout tarball for `ctr images import`, without
// Docker or a registry.
//
//	go run ./hack/cluster/image -ref localhost/orchestratord/pause:v1 \
//	    -file /pause=bin/pause -entrypoint /pause -user 65535:65535 -out pause.tar
//
// The image is reproducible: file times are zero and the config has no
// creation time, so the same binaries give the same digest.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
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

// zeroTime stamps every file of the layout tarball, for reproducibility.
var zeroTime = time.Unix(0, 0)

type fileFlags []string

func (f *fileFlags) String() string     { return strings.Join(*f, ",") }
func (f *fileFlags) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	var files fileFlags
	ref := flag.String("ref", "", "image reference stored in the tarball, e.g. localhost/orchestratord/pause:v1 (required)")
	out := flag.String("out", "", "output tarball (required)")
	entrypoint := flag.String("entrypoint", "", "entrypoint, words separated by spaces (default: the first -file's path)")
	user := flag.String("user", "65532:65532", "user the image runs as")
	workdir := flag.String("workdir", "/", "working directory")
	var env fileFlags
	flag.Var(&files, "file", "IMAGEPATH=HOSTPATH, a file to put into the image with mode 0755 (repeatable)")
	flag.Var(&env, "env", "KEY=VALUE in the image's environment (repeatable)")
	flag.Parse()
	if *ref == "" || *out == "" || len(files) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*ref, *out, *entrypoint, *user, *workdir, files, env); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ref, out, entrypoint, user, workdir string, files, env []string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("reference %q: %w", ref, err)
	}
	layerTar, first, err := layerTarball(files)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return err
	}
	if entrypoint == "" {
		entrypoint = first
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Config = v1.Config{
		Entrypoint: strings.Fields(entrypoint),
		User:       user,
		WorkingDir: workdir,
		Env:        append([]string{"PATH=/"}, env...),
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return writeLayoutTarball(out, tag, img)
}

// layerTarball builds the layer: each file at its image path with mode 0755,
// owned by root, with the parent directories it needs.
func layerTarball(files []string) ([]byte, string, error) {
	type entry struct{ imagePath, hostPath string }
	var entries []entry
	for _, f := range files {
		imagePath, hostPath, ok := strings.Cut(f, "=")
		if !ok || !strings.HasPrefix(imagePath, "/") {
			return nil, "", fmt.Errorf("-file %q: want /IMAGEPATH=HOSTPATH", f)
		}
		entries = append(entries, entry{path.Clean(imagePath), hostPath})
	}
	first := entries[0].imagePath
	sort.Slice(entries, func(i, j int) bool { return entries[i].imagePath < entries[j].imagePath })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, e := range entries {
		var parents []string
		for d := path.Dir(e.imagePath); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return nil, "", err
			}
		}
		data, err := os.ReadFile(e.hostPath)
		if err != nil {
			return nil, "", err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(e.imagePath, "/"), Mode: 0o755, Size: int64(len(data)), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), first, nil
}

// writeLayoutTarball writes img as an OCI image layout, annotated with its
// full reference (containerd's import reads io.containerd.image.name), and
// tars the layout into out atomically.
func writeLayoutTarball(out string, tag name.Tag, img v1.Image) error {
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
