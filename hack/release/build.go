package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/materializeinc/orchestratord/hack/internal/ociimage"
)

// programs are the released images, each named as its cmd/ package and its
// chart values key.
var programs = []string{"webhook", "controllers"}

// chartPath is the chart, relative to the module's root.
const chartPath = "charts/orchestratord"

type buildOptions struct {
	Source       string // the module's root
	Out          string
	Registry     string // "": the chart's global.imageRegistry
	Repository   string // "": the chart's repositories
	Version      string // "": the chart's version
	BuildVersion string // "": v<appVersion>
	Helm         string // "": hack/kube-binaries.sh helm
	Platforms    []v1.Platform
	Created      time.Time
	Log          io.Writer
}

// Release is release.json: what build wrote, every digest of it.
type Release struct {
	Version string `json:"version"`
	// Registry is the images' registry host; empty: Docker Hub's, as image
	// references without one resolve.
	Registry        string         `json:"registry"`
	SourceDateEpoch int64          `json:"sourceDateEpoch"`
	Images          []ImageRelease `json:"images"`
	Chart           ChartRelease   `json:"chart"`
}

type ImageRelease struct {
	Name       string `json:"name"`
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	// Digest is the multi-arch image index's.
	Digest string `json:"digest"`
	// Layout is the OCI image layout holding the index and the SBOMs,
	// relative to release.json.
	Layout    string            `json:"layout"`
	Platforms []PlatformRelease `json:"platforms"`
}

type PlatformRelease struct {
	Platform string      `json:"platform"`
	Digest   string      `json:"digest"`
	SBOM     SBOMRelease `json:"sbom"`
}

type SBOMRelease struct {
	// Digest is the SBOM artefact's manifest, a referrer of the platform image.
	Digest string `json:"digest"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

type ChartRelease struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// Reference is the image's repository with the registry, without a tag.
func (i ImageRelease) Reference(registry string) string {
	if registry == "" {
		return i.Repository
	}
	return registry + "/" + i.Repository
}

func build(ctx context.Context, o buildOptions) (*Release, error) {
	src, err := filepath.Abs(o.Source)
	if err != nil {
		return nil, err
	}
	chart, err := readChart(filepath.Join(src, chartPath))
	if err != nil {
		return nil, err
	}
	if o.Version != "" && strings.TrimPrefix(o.Version, "v") != chart.Version {
		return nil, fmt.Errorf("releasing %s but %s/Chart.yaml has version %s: set version and appVersion there first", o.Version, chartPath, chart.Version)
	}
	rel := &Release{Version: chart.Version, Registry: o.Registry, SourceDateEpoch: o.Created.Unix()}
	if rel.Registry == "" {
		rel.Registry = chart.Registry
	}
	tag := chart.AppVersion
	for _, p := range programs {
		repo := chart.Repositories[p]
		if o.Repository != "" {
			repo = o.Repository + "-" + p
		}
		img := ImageRelease{Name: p, Repository: repo, Tag: tag, Layout: "oci/" + p}
		if _, err := name.NewTag(img.Reference(rel.Registry) + ":" + tag); err != nil {
			return nil, fmt.Errorf("image reference: %w", err)
		}
		rel.Images = append(rel.Images, img)
	}
	buildVersion := o.BuildVersion
	if buildVersion == "" {
		buildVersion = "v" + chart.AppVersion
	}
	helm := o.Helm
	if helm == "" {
		out, err := exec.CommandContext(ctx, filepath.Join(src, "hack/kube-binaries.sh"), "helm").Output()
		if err != nil {
			return nil, fmt.Errorf("hack/kube-binaries.sh helm: %w", err)
		}
		helm = filepath.Join(strings.TrimSpace(string(out)), "helm")
	}
	if err := prepareOut(o.Out); err != nil {
		return nil, err
	}
	module, err := modulePath(src)
	if err != nil {
		return nil, err
	}
	bins, err := os.MkdirTemp("", "release-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bins)
	for _, pl := range o.Platforms {
		fmt.Fprintf(o.Log, "release: compiling %s for %s\n", strings.Join(programs, ", "), pl)
		if err := compile(ctx, src, module, buildVersion, pl, platformDir(bins, pl)); err != nil {
			return nil, err
		}
	}
	for i := range rel.Images {
		fmt.Fprintf(o.Log, "release: image %s:%s\n", rel.Images[i].Reference(rel.Registry), tag)
		if err := writeImage(o, &rel.Images[i], bins, buildVersion); err != nil {
			return nil, err
		}
	}
	fmt.Fprintln(o.Log, "release: packaging the chart")
	pins := map[string]string{"global.imageRegistry": rel.Registry}
	for _, img := range rel.Images {
		pins[img.Name+".image.repository"] = img.Repository
		pins[img.Name+".image.tag"] = img.Tag
		pins[img.Name+".image.digest"] = img.Digest
	}
	if rel.Chart, err = packageChart(ctx, helm, filepath.Join(src, chartPath), o.Out, pins, o.Created); err != nil {
		return nil, err
	}
	return rel, writeManifests(o.Out, rel)
}

// prepareOut empties out, refusing a directory that is not an earlier
// build's: it is replaced as a whole.
func prepareOut(out string) error {
	entries, err := os.ReadDir(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(out, "release.json")); err != nil {
			return fmt.Errorf("%s is not empty and holds no release.json: not replacing it", out)
		}
		if err := os.RemoveAll(out); err != nil {
			return err
		}
	}
	return os.MkdirAll(out, 0o755)
}

func platformDir(root string, p v1.Platform) string {
	return filepath.Join(root, p.OS+"-"+p.Architecture+p.Variant)
}

// compile cross-compiles the programs for p into dir. Reproducible: no
// paths (-trimpath), no build ID, no cgo, the baseline instruction set, and
// the commit recorded from a git checkout whatever GOFLAGS says (the SBOM
// names it), so that every machine builds the same binary.
func compile(ctx context.Context, src, module, version string, p v1.Platform, dir string) error {
	args := []string{"build", "-trimpath", "-buildvcs=auto",
		"-ldflags", "-s -w -buildid= -X " + module + "/pkg/version.Version=" + version,
		"-o", dir + "/"}
	for _, prog := range programs {
		args = append(args, "./cmd/"+prog)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOAMD64=v1", "GOARM64=v8.0")
	if p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %w", p, err)
	}
	return nil
}

// writeImage writes img's layout: the multi-arch index of its platform images
// (tagged), then each platform image's SBOM artefact referring to it.
func writeImage(o buildOptions, img *ImageRelease, bins, buildVersion string) error {
	created := o.Created.Format(time.RFC3339)
	title := img.Repository[strings.LastIndex(img.Repository, "/")+1:]
	labels := map[string]string{
		"org.opencontainers.image.title":   title,
		"org.opencontainers.image.version": img.Tag,
		"org.opencontainers.image.created": created,
	}
	var adds []mutate.IndexAddendum
	var sboms []v1.Image
	for _, pl := range o.Platforms {
		bin := filepath.Join(platformDir(bins, pl), img.Name)
		file := "/usr/local/bin/" + img.Name
		image, err := ociimage.Image(ociimage.Config{
			Platform:   pl,
			Files:      []ociimage.File{{Path: file, Source: bin}},
			User:       "65532:65532", // the chart's runAsUser, distroless's nonroot
			WorkingDir: "/",
			Env:        []string{"PATH=/usr/local/bin"},
			Labels:     labels,
			Created:    o.Created,
		})
		if err != nil {
			return err
		}
		desc, err := partial.Descriptor(image)
		if err != nil {
			return err
		}
		doc, err := sbom(bin, buildVersion, o.Created)
		if err != nil {
			return err
		}
		sbomFile := fmt.Sprintf("sbom/%s-%s-%s%s.cdx.json", img.Name, pl.OS, pl.Architecture, pl.Variant)
		art, err := newSBOMArtifact(doc, filepath.Base(sbomFile), *desc, o.Created)
		if err != nil {
			return err
		}
		artDigest, err := art.Digest()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(o.Out, "sbom"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(o.Out, sbomFile), doc, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(doc)
		img.Platforms = append(img.Platforms, PlatformRelease{
			Platform: pl.String(),
			Digest:   desc.Digest.String(),
			SBOM:     SBOMRelease{Digest: artDigest.String(), File: sbomFile, SHA256: hex.EncodeToString(sum[:])},
		})
		p := pl
		adds = append(adds, mutate.IndexAddendum{Add: image, Descriptor: v1.Descriptor{Platform: &p}})
		sboms = append(sboms, art)
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	img.Digest = d.String()
	lp, err := layout.Write(filepath.Join(o.Out, img.Layout), empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": img.Tag})); err != nil {
		return err
	}
	for _, art := range sboms {
		if err := lp.AppendImage(art); err != nil {
			return err
		}
	}
	return nil
}

// writeManifests writes release.json, then SHA256SUMS of every plain file
// (the chart, the SBOMs, release.json) for `sha256sum -c`.
func writeManifests(out string, rel *Release) error {
	b, err := json.MarshalIndent(rel, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "release.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	files := []string{"release.json", rel.Chart.File}
	for _, img := range rel.Images {
		for _, p := range img.Platforms {
			files = append(files, p.SBOM.File)
		}
	}
	sort.Strings(files)
	var sums strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			return err
		}
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256(data), f)
	}
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums.String()), 0o644)
}

func readRelease(dir string) (*Release, error) {
	b, err := os.ReadFile(filepath.Join(dir, "release.json"))
	if err != nil {
		return nil, err
	}
	var rel Release
	if err := json.Unmarshal(b, &rel); err != nil {
		return nil, fmt.Errorf("%s/release.json: %w", dir, err)
	}
	return &rel, nil
}

func modulePath(src string) (string, error) {
	b, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod names no module", src)
}

func parsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(strings.TrimSpace(s), "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return v1.Platform{}, fmt.Errorf("platform %q: want os/arch[/variant]", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}
