package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func remoteOptions(ctx context.Context) []remote.Option {
	// The default keychain: the Docker config file ($DOCKER_CONFIG), which
	// CI writes from its secrets and `docker login` or `crane auth login`
	// write on a workstation.
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// push writes each image index of a verified build under its tag, then each
// SBOM artefact by digest (go-containerregistry records it as a referrer of
// its subject: through the registry's referrers API, or the fallback tag
// sha256-<digest> where there is none). registry and repository, when set,
// must be the build's: the chart in it points there.
func push(ctx context.Context, dir, registry, repository string, log io.Writer) error {
	rel, err := readRelease(dir)
	if err != nil {
		return err
	}
	if registry != "" && registry != rel.Registry {
		return fmt.Errorf("%s was built for registry %q, not %q (its chart points there): build it again with that registry", dir, rel.Registry, registry)
	}
	for _, img := range rel.Images {
		if repository != "" && img.Repository != repository+"-"+img.Name {
			return fmt.Errorf("%s was built for repository %s, not %s-%s: build it again with that repository", dir, img.Repository, repository, img.Name)
		}
	}
	if _, err := verifyLocal(dir); err != nil {
		return fmt.Errorf("not pushing: %w", err)
	}
	opts := remoteOptions(ctx)
	for _, img := range rel.Images {
		tag, err := name.NewTag(img.Reference(rel.Registry) + ":" + img.Tag)
		if err != nil {
			return err
		}
		ii, im, err := layoutIndex(dir, img)
		if err != nil {
			return err
		}
		h, err := v1.NewHash(img.Digest)
		if err != nil {
			return err
		}
		idx, err := ii.ImageIndex(h)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "release: pushing %s@%s\n", tag, img.Digest)
		if err := remote.WriteIndex(tag, idx, opts...); err != nil {
			return err
		}
		for _, p := range img.Platforms {
			if !slices.ContainsFunc(im.Manifests, func(d v1.Descriptor) bool { return d.Digest.String() == p.SBOM.Digest }) {
				return fmt.Errorf("no SBOM %s in %s", p.SBOM.Digest, img.Layout)
			}
			sh, err := v1.NewHash(p.SBOM.Digest)
			if err != nil {
				return err
			}
			art, err := ii.Image(sh)
			if err != nil {
				return err
			}
			fmt.Fprintf(log, "release: pushing the SBOM of %s (%s) as %s\n", p.Platform, p.Digest, p.SBOM.Digest)
			if err := remote.Write(tag.Context().Digest(p.SBOM.Digest), art, opts...); err != nil {
				return err
			}
		}
	}
	return nil
}

// verifyRemote checks that the registry serves each tag at the built digest
// and lists each platform image's SBOM among its referrers.
func verifyRemote(ctx context.Context, rel *Release) error {
	opts := remoteOptions(ctx)
	for _, img := range rel.Images {
		tag, err := name.NewTag(img.Reference(rel.Registry) + ":" + img.Tag)
		if err != nil {
			return err
		}
		desc, err := remote.Get(tag, opts...)
		if err != nil {
			return err
		}
		if desc.Digest.String() != img.Digest {
			return fmt.Errorf("%s is %s in the registry, %s in the build", tag, desc.Digest, img.Digest)
		}
		for _, p := range img.Platforms {
			refs, err := remote.Referrers(tag.Context().Digest(p.Digest), opts...)
			if err != nil {
				return err
			}
			rm, err := refs.IndexManifest()
			if err != nil {
				return err
			}
			// By digest, which pins the artefact's type and subject (not every
			// registry reports artifactType as OCI 1.1 says).
			if !slices.ContainsFunc(rm.Manifests, func(d v1.Descriptor) bool { return d.Digest.String() == p.SBOM.Digest }) {
				return fmt.Errorf("%s@%s (%s) does not list its SBOM %s among its referrers", tag.Context(), p.Digest, p.Platform, p.SBOM.Digest)
			}
		}
	}
	return nil
}
