// Command release builds the project's release artefacts without Docker, and
// pushes them (docs/releasing.md):
//
//	go run ./hack/release build  [-out bin/release] [-registry R] [-repository P] [-version V]
//	go run ./hack/release push   [-dir bin/release] [-registry R] [-repository P]
//	go run ./hack/release verify [-dir bin/release] [-remote]
//	go run ./hack/release login  [-registry R] -username U < password
//
// build cross-compiles cmd/webhook and cmd/controllers for linux/amd64 and
// linux/arm64 and writes, reproducibly, one OCI image layout per program
// (oci/<program>: a multi-arch image index tagged with the chart's
// appVersion, and one CycloneDX SBOM per platform image as an OCI referrer of
// it; the SBOMs are also written to sbom/), the chart packaged with the
// images' digests pinned in its values, release.json (every digest) and
// SHA256SUMS. push writes the images and their SBOMs to the registry with
// go-containerregistry (credentials: the default keychain, i.e. the Docker
// config file, which login writes). verify checks a build (and with -remote
// what was pushed).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = buildCmd(ctx, args)
	case "push":
		err = pushCmd(ctx, args)
	case "verify":
		err = verifyCmd(ctx, args)
	case "login":
		err = loginCmd(args, os.Stdin)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release build|push|verify|login [flags] (release <command> -h lists them)")
	os.Exit(2)
}

func buildCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	o := buildOptions{}
	fs.StringVar(&o.Source, "source", ".", "the module's root")
	fs.StringVar(&o.Out, "out", "bin/release", "output directory, replaced")
	fs.StringVar(&o.Registry, "registry", "", "registry host of the images, written into the chart as global.imageRegistry (default: the chart's, none: Docker Hub)")
	fs.StringVar(&o.Repository, "repository", "", "repository path prefix of the images, <prefix>-webhook and <prefix>-controllers (default: the chart's repositories)")
	fs.StringVar(&o.Version, "version", "", "the version being released; refused unless it is the chart's version (default: the chart's)")
	fs.StringVar(&o.BuildVersion, "build-version", "", "the programs' version (pkg/version.Version; default v<appVersion>)")
	fs.StringVar(&o.Helm, "helm", "", "helm binary (default: built by hack/kube-binaries.sh helm)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "image platforms")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time every timestamp in the artefacts gets, e.g. the commit's (default $SOURCE_DATE_EPOCH, else 0)")
	fs.Parse(args)
	if *epoch != "" {
		s, err := strconv.ParseInt(*epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("-source-date-epoch %q: %w", *epoch, err)
		}
		o.Created = time.Unix(s, 0).UTC()
	} else {
		o.Created = time.Unix(0, 0).UTC()
	}
	for _, p := range strings.Split(*platforms, ",") {
		pl, err := parsePlatform(p)
		if err != nil {
			return err
		}
		o.Platforms = append(o.Platforms, pl)
	}
	o.Log = os.Stderr
	rel, err := build(ctx, o)
	if err != nil {
		return err
	}
	for _, img := range rel.Images {
		fmt.Printf("%s:%s@%s\n", img.Reference(rel.Registry), img.Tag, img.Digest)
	}
	fmt.Println(rel.Chart.File, "sha256:"+rel.Chart.SHA256)
	return nil
}

func pushCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("dir", "bin/release", "what release build wrote")
	registry := fs.String("registry", "", "refuse unless the build was for this registry (the chart points there)")
	repository := fs.String("repository", "", "refuse unless the build was for this repository prefix")
	fs.Parse(args)
	return push(ctx, *dir, *registry, *repository, os.Stderr)
}

func verifyCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	dir := fs.String("dir", "bin/release", "what release build wrote")
	remoteToo := fs.Bool("remote", false, "also check that the registry serves the same digests and lists each SBOM as a referrer")
	fs.Parse(args)
	rel, err := verifyLocal(*dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "release: %s verified: digests, SBOMs against the binaries' build information, the chart's pinned digests\n", *dir)
	if *remoteToo {
		if err := verifyRemote(ctx, rel); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "release: the registry serves the same digests and lists the SBOMs")
	}
	return nil
}
