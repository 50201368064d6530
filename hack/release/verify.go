package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"
)

// verifyLocal checks what build wrote into dir against release.json: every
// blob against its digest, each index's and platform image's digest, each
// SBOM (as a referrer of its image, as a file) against the build information
// of the binary in that image, and the chart's digest pins.
func verifyLocal(dir string) (*Release, error) {
	rel, err := readRelease(dir)
	if err != nil {
		return nil, err
	}
	for _, img := range rel.Images {
		if err := verifyImage(dir, img); err != nil {
			return nil, fmt.Errorf("%s: %w", img.Name, err)
		}
	}
	if err := verifyChart(dir, rel); err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	return rel, nil
}

// layoutIndex is an image's layout's top-level index and its manifest.
func layoutIndex(dir string, img ImageRelease) (v1.ImageIndex, *v1.IndexManifest, error) {
	lp, err := layout.FromPath(filepath.Join(dir, img.Layout))
	if err != nil {
		return nil, nil, err
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	return ii, im, nil
}

func verifyImage(dir string, img ImageRelease) error {
	ii, im, err := layoutIndex(dir, img)
	if err != nil {
		return err
	}
	var tagged *v1.Descriptor
	for i, d := range im.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == img.Tag {
			tagged = &im.Manifests[i]
		}
	}
	if tagged == nil || tagged.Digest.String() != img.Digest {
		return fmt.Errorf("the layout's %s is %v, release.json says %s", img.Tag, tagged, img.Digest)
	}
	idx, err := ii.ImageIndex(tagged.Digest)
	if err != nil {
		return err
	}
	// Manifests and configs against their digests; each layer is checked as
	// its binary is read out (imageFile), which decompresses it only once.
	if err := validate.Index(idx, validate.Fast); err != nil {
		return err
	}
	idxm, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(idxm.Manifests) != len(img.Platforms) {
		return fmt.Errorf("the index has %d images, release.json %d", len(idxm.Manifests), len(img.Platforms))
	}
	for i, p := range img.Platforms {
		d := idxm.Manifests[i]
		if d.Digest.String() != p.Digest || d.Platform == nil || d.Platform.String() != p.Platform {
			return fmt.Errorf("the index's image %d is %s for %v, release.json says %s for %s", i, d.Digest, d.Platform, p.Digest, p.Platform)
		}
		image, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		bin, err := imageFile(image, "usr/local/bin/"+img.Name)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Platform, err)
		}
		bi, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			return fmt.Errorf("%s: %w", p.Platform, err)
		}
		doc, err := sbomReferrer(ii, im, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Platform, err)
		}
		file, err := os.ReadFile(filepath.Join(dir, p.SBOM.File))
		if err != nil {
			return err
		}
		if sum := sha256.Sum256(file); !bytes.Equal(file, doc) || hex.EncodeToString(sum[:]) != p.SBOM.SHA256 {
			return fmt.Errorf("%s differs from the SBOM in the layout or from its sha256 in release.json", p.SBOM.File)
		}
		if err := checkSBOM(doc, bi, bin); err != nil {
			return fmt.Errorf("%s: %w", p.SBOM.File, err)
		}
	}
	return nil
}

// sbomReferrer is the SBOM of platform image p from the layout: the
// CycloneDX artefact whose subject is p's image.
func sbomReferrer(ii v1.ImageIndex, im *v1.IndexManifest, p PlatformRelease) ([]byte, error) {
	for _, d := range im.Manifests {
		if d.Digest.String() != p.SBOM.Digest {
			continue
		}
		if d.ArtifactType != sbomMediaType {
			return nil, fmt.Errorf("%s's artifactType is %q", d.Digest, d.ArtifactType)
		}
		art, err := ii.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		m, err := art.Manifest()
		if err != nil {
			return nil, err
		}
		if m.Subject == nil || m.Subject.Digest.String() != p.Digest || len(m.Layers) != 1 {
			return nil, fmt.Errorf("SBOM artefact %s does not refer to %s with one blob", d.Digest, p.Digest)
		}
		l, err := art.LayerByDigest(m.Layers[0].Digest)
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		doc, err := io.ReadAll(rc)
		if err != nil {
			return nil, err
		}
		if h, _, _ := v1.SHA256(bytes.NewReader(doc)); h != m.Layers[0].Digest {
			return nil, fmt.Errorf("SBOM blob %s does not match its digest", m.Layers[0].Digest)
		}
		return doc, nil
	}
	return nil, fmt.Errorf("no SBOM artefact %s in the layout", p.SBOM.Digest)
}

// imageFile is a file's content in an image's layers, each of which is
// checked against its digest, size and diff ID as it is read.
func imageFile(img v1.Image, path string) ([]byte, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	var found []byte
	for _, l := range layers {
		digest, err := l.Digest()
		if err != nil {
			return nil, err
		}
		size, err := l.Size()
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		h, n, err := v1.SHA256(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if h != digest || n != size {
			return nil, fmt.Errorf("layer %s: its blob is %s, %d bytes (the manifest says %d)", digest, h, n, size)
		}
		diffID, err := l.DiffID()
		if err != nil {
			return nil, err
		}
		rc, err = l.Uncompressed()
		if err != nil {
			return nil, err
		}
		hash := sha256.New()
		tr := tar.NewReader(io.TeeReader(rc, hash))
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				return nil, err
			}
			if hdr.Name == path {
				if found, err = io.ReadAll(tr); err != nil {
					rc.Close()
					return nil, err
				}
			}
		}
		// The tar's end-of-archive padding belongs to the diff ID too.
		_, err = io.Copy(hash, rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if got := "sha256:" + hex.EncodeToString(hash.Sum(nil)); got != diffID.String() {
			return nil, fmt.Errorf("layer %s's content is %s, not its diff ID %s", digest, got, diffID)
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %s in the image", path)
	}
	return found, nil
}

// checkSBOM checks that an SBOM describes bin: its application is the main
// module with bin's digest, and its components are exactly the modules Go
// linked into bin and the standard library.
func checkSBOM(doc []byte, bi *buildinfo.BuildInfo, bin []byte) error {
	var bom cdxBOM
	if err := json.Unmarshal(doc, &bom); err != nil {
		return err
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.5" {
		return fmt.Errorf("not CycloneDX 1.5: %q %q", bom.BOMFormat, bom.SpecVersion)
	}
	app := bom.Metadata.Component
	sum := sha256.Sum256(bin)
	if app.Name != bi.Main.Path || len(app.Hashes) != 1 || app.Hashes[0].Content != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("its application is %s %v, the binary's main module is %s (sha256 %x)", app.Name, app.Hashes, bi.Main.Path, sum)
	}
	want := []string{"stdlib@" + bi.GoVersion}
	for _, m := range bi.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		want = append(want, m.Path+"@"+m.Version)
	}
	var got []string
	for _, c := range bom.Components {
		if !strings.HasPrefix(c.PURL, "pkg:golang/") {
			return fmt.Errorf("component %s has purl %q", c.Name, c.PURL)
		}
		got = append(got, c.Name+"@"+c.Version)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("its components are %v, the binary links %v", got, want)
	}
	if len(bom.Dependencies) != 1 || len(bom.Dependencies[0].DependsOn) != len(bom.Components) {
		return fmt.Errorf("the application does not depend on every component")
	}
	return nil
}

// verifyChart checks the chart's digest and that its values pin the images.
func verifyChart(dir string, rel *Release) error {
	data, err := os.ReadFile(filepath.Join(dir, rel.Chart.File))
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != rel.Chart.SHA256 {
		return fmt.Errorf("%s's sha256 is %x, release.json says %s", rel.Chart.File, sum, rel.Chart.SHA256)
	}
	text, err := chartFile(data, "values.yaml")
	if err != nil {
		return err
	}
	var values map[string]any
	if err := yaml.Unmarshal(text, &values); err != nil {
		return err
	}
	want := map[string]string{"global.imageRegistry": rel.Registry}
	for _, img := range rel.Images {
		want[img.Name+".image.repository"] = img.Repository
		want[img.Name+".image.tag"] = img.Tag
		want[img.Name+".image.digest"] = img.Digest
	}
	for path, v := range want {
		if got := lookup(values, path); got != v {
			return fmt.Errorf("values.yaml: %s is %v, want %q", path, got, v)
		}
	}
	return nil
}

// chartFile is a file of a packaged chart, by its path under the chart's
// directory.
func chartFile(tgz []byte, path string) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no %s in the chart", path)
		}
		if err != nil {
			return nil, err
		}
		if _, rest, ok := strings.Cut(hdr.Name, "/"); ok && rest == path {
			return io.ReadAll(tr)
		}
	}
}
