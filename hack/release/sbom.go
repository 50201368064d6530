package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/uuid"
)

// sbomMediaType is CycloneDX's JSON media type: the SBOM artefact's
// artifactType and its one blob's media type.
const sbomMediaType = "application/vnd.cyclonedx+json"

// The CycloneDX 1.5 JSON subset written here. Field order is fixed by the
// structs and every list is sorted, so the same binary gives the same bytes.
type cdxBOM struct {
	BOMFormat    string          `json:"bomFormat"`
	SpecVersion  string          `json:"specVersion"`
	SerialNumber string          `json:"serialNumber"`
	Version      int             `json:"version"`
	Metadata     cdxMetadata     `json:"metadata"`
	Components   []cdxComponent  `json:"components"`
	Dependencies []cdxDependency `json:"dependencies"`
}

type cdxMetadata struct {
	Timestamp string       `json:"timestamp"`
	Tools     cdxTools     `json:"tools"`
	Component cdxComponent `json:"component"`
}

type cdxTools struct {
	Components []cdxComponent `json:"components"`
}

type cdxComponent struct {
	BOMRef     string        `json:"bom-ref,omitempty"`
	Type       string        `json:"type"`
	Name       string        `json:"name"`
	Version    string        `json:"version,omitempty"`
	PURL       string        `json:"purl,omitempty"`
	Hashes     []cdxHash     `json:"hashes,omitempty"`
	Properties []cdxProperty `json:"properties,omitempty"`
}

type cdxHash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type cdxProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type cdxDependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// sbom describes the Go binary at path from the build information the Go
// toolchain embeds in it (debug/buildinfo): the main module as the
// application, every module linked in and the standard library as its
// components. fallbackVersion names the main module when Go recorded none
// ("(devel)": built without VCS information).
func sbom(path, fallbackVersion string, created time.Time) ([]byte, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(bin)
	mainVersion := bi.Main.Version
	if mainVersion == "" || mainVersion == "(devel)" {
		mainVersion = fallbackVersion
	}
	app := cdxComponent{
		Type:    "application",
		Name:    bi.Main.Path,
		Version: mainVersion,
		PURL:    purl(bi.Main.Path, mainVersion),
		Hashes:  []cdxHash{{Alg: "SHA-256", Content: hex.EncodeToString(sum[:])}},
		Properties: []cdxProperty{
			{Name: "cdx:gomod:binary:name", Value: bi.Path},
			{Name: "cdx:gomod:toolchain:version", Value: bi.GoVersion},
		},
	}
	app.BOMRef = app.PURL
	for _, s := range bi.Settings {
		key := "cdx:gomod:build:" + s.Key
		if s.Key == "CGO_ENABLED" || strings.HasPrefix(s.Key, "GO") {
			key = "cdx:gomod:build:env:" + s.Key
		}
		app.Properties = append(app.Properties, cdxProperty{Name: key, Value: s.Value})
	}
	sort.SliceStable(app.Properties, func(i, j int) bool { return app.Properties[i].Name < app.Properties[j].Name })

	var components []cdxComponent
	for _, m := range bi.Deps {
		components = append(components, moduleComponent(m))
	}
	// The standard library as syft and grype name it, so scanners match Go's
	// own advisories.
	goVersion := strings.TrimPrefix(bi.GoVersion, "go")
	components = append(components, cdxComponent{
		BOMRef: purl("stdlib", goVersion), Type: "library", Name: "stdlib", Version: bi.GoVersion, PURL: purl("stdlib", goVersion),
	})
	sort.Slice(components, func(i, j int) bool { return components[i].BOMRef < components[j].BOMRef })
	dependsOn := make([]string, 0, len(components))
	for _, c := range components {
		dependsOn = append(dependsOn, c.BOMRef)
	}

	bom := cdxBOM{
		BOMFormat:   "CycloneDX",
		SpecVersion: "1.5",
		// A name-based UUID of the binary's digest: the same binary, the same
		// serial number.
		SerialNumber: "urn:uuid:" + uuid.NewSHA1(uuid.NameSpaceOID, []byte("sha256:"+hex.EncodeToString(sum[:]))).String(),
		Version:      1,
		Metadata: cdxMetadata{
			Timestamp: created.UTC().Format(time.RFC3339),
			Tools: cdxTools{Components: []cdxComponent{{
				Type: "application", Name: bi.Main.Path + "/hack/release",
			}}},
			Component: app,
		},
		Components:   components,
		Dependencies: []cdxDependency{{Ref: app.BOMRef, DependsOn: dependsOn}},
	}
	out, err := json.MarshalIndent(bom, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// moduleComponent is one module linked into the binary: the replacement when
// go.mod replaces it, with go.sum's hash (h1:, a SHA-256 of the module's file
// hashes, as syft reports it).
func moduleComponent(m *debug.Module) cdxComponent {
	var props []cdxProperty
	if m.Replace != nil {
		props = append(props, cdxProperty{Name: "cdx:gomod:replaces", Value: m.Path + "@" + m.Version})
		m = m.Replace
	}
	c := cdxComponent{Type: "library", Name: m.Path, Version: m.Version, PURL: purl(m.Path, m.Version), Properties: props}
	c.BOMRef = c.PURL
	if h, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
		if b, err := base64.StdEncoding.DecodeString(h); err == nil {
			c.Hashes = []cdxHash{{Alg: "SHA-256", Content: hex.EncodeToString(b)}}
		}
	}
	return c
}

// purl is a Go module's package URL, pkg:golang/<path>@<version>.
func purl(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p := "pkg:golang/" + strings.Join(segs, "/")
	if version != "" {
		// PathEscape leaves '+' (of +incompatible) alone; the purl spec wants it encoded.
		p += "@" + strings.ReplaceAll(url.PathEscape(version), "+", "%2B")
	}
	return p
}

// sbomArtifact is the OCI 1.1 artefact carrying an SBOM: an image manifest
// with artifactType CycloneDX, the empty config and the SBOM as its one blob,
// whose subject is the image it describes, so registries list it among that
// image's referrers.
type sbomArtifact struct {
	manifest []byte
	blob     v1.Layer
}

// emptyJSON is the OCI empty descriptor's content.
var emptyJSON = []byte("{}")

func newSBOMArtifact(doc []byte, title string, subject v1.Descriptor, created time.Time) (v1.Image, error) {
	blob := static.NewLayer(doc, types.MediaType(sbomMediaType))
	blobDigest, err := blob.Digest()
	if err != nil {
		return nil, err
	}
	configDigest, _, err := v1.SHA256(bytes.NewReader(emptyJSON))
	if err != nil {
		return nil, err
	}
	// The subject is referenced, not embedded: only what identifies it.
	subject = v1.Descriptor{MediaType: subject.MediaType, Size: subject.Size, Digest: subject.Digest}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  sbomMediaType,
		Config:        v1.Descriptor{MediaType: types.OCIEmptyJSON, Size: int64(len(emptyJSON)), Digest: configDigest, Data: emptyJSON},
		Layers: []v1.Descriptor{{
			MediaType:   types.MediaType(sbomMediaType),
			Size:        int64(len(doc)),
			Digest:      blobDigest,
			Annotations: map[string]string{"org.opencontainers.image.title": title},
		}},
		Subject:     &subject,
		Annotations: map[string]string{"org.opencontainers.image.created": created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&sbomArtifact{manifest: raw, blob: blob})
}

func (a *sbomArtifact) RawConfigFile() ([]byte, error)      { return emptyJSON, nil }
func (a *sbomArtifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *sbomArtifact) RawManifest() ([]byte, error)        { return a.manifest, nil }

func (a *sbomArtifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.blob.Digest(); err != nil || d != h {
		return nil, fmt.Errorf("SBOM artefact has no blob %s", h)
	}
	return a.blob, nil
}
