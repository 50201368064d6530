// Command image packs static binaries into a single-layer OCI image and
// writes it as an OCI image-layout tarball for `ctr images import`, without
// Docker or a registry.
//
//	go run ./hack/cluster/image -ref localhost/orchestratord/pause:v1 \
//	    -file /pause=bin/pause -entrypoint /pause -user 65535:65535 -out pause.tar
//
// The image is reproducible (hack/internal/ociimage): file times are zero and
// the config has no creation time, so the same binaries give the same digest.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/materializeinc/orchestratord/hack/internal/ociimage"
)

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
	stopSignal := flag.String("stop-signal", "", "signal the runtime stops the container with, e.g. SIGQUIT (default: SIGTERM)")
	var env fileFlags
	flag.Var(&files, "file", "IMAGEPATH=HOSTPATH, a file to put into the image with mode 0755 (repeatable)")
	flag.Var(&env, "env", "KEY=VALUE in the image's environment (repeatable)")
	flag.Parse()
	if *ref == "" || *out == "" || len(files) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*ref, *out, *entrypoint, *user, *workdir, *stopSignal, files, env); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ref, out, entrypoint, user, workdir, stopSignal string, files, env []string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("reference %q: %w", ref, err)
	}
	c := ociimage.Config{
		// The local cluster runs on this machine.
		Platform:   v1.Platform{OS: "linux", Architecture: runtime.GOARCH},
		Entrypoint: strings.Fields(entrypoint),
		User:       user,
		WorkingDir: workdir,
		Env:        append([]string{"PATH=/"}, env...),
		StopSignal: stopSignal,
	}
	for _, f := range files {
		imagePath, hostPath, ok := strings.Cut(f, "=")
		if !ok || !strings.HasPrefix(imagePath, "/") {
			return fmt.Errorf("-file %q: want /IMAGEPATH=HOSTPATH", f)
		}
		c.Files = append(c.Files, ociimage.File{Path: imagePath, Source: hostPath})
	}
	img, err := ociimage.Image(c)
	if err != nil {
		return err
	}
	return ociimage.WriteLayoutTarball(out, tag, img)
}
