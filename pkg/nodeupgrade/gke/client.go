package gke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	container "google.golang.org/api/container/v1beta1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	pubsub "google.golang.org/api/pubsub/v1"
	htransport "google.golang.org/api/transport/http"
)

// maxResponse bounds every response body read from the Google APIs. A
// Pub/Sub message is at most 10 MB (about 13.4 MB in base64), so a pull of
// one message always fits; a pull of many that does not is retried one
// message at a time.
const maxResponse = 16 << 20

// maxPools bounds the node pools of one listing considered.
const maxPools = 1000

var errResponseTooLarge = errors.New("response larger than the limit")

// limitedTransport fails a response body past maxResponse instead of
// reading it whole.
type limitedTransport struct{ next http.RoundTripper }

func (l limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > maxResponse {
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %w (%d bytes)", req.Method, req.URL.Path, errResponseTooLarge, resp.ContentLength)
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxResponse}
	return resp, nil
}

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// gcp holds the two Google API clients, authenticated by Application
// Default Credentials (Workload Identity on GKE) unless the options say
// otherwise.
type gcp struct {
	container *container.Service
	pubsub    *pubsub.Service
}

func newGCP(ctx context.Context, c *Config) (*gcp, error) {
	// Each API gets its own authenticated client, whose responses are
	// bounded.
	client := func(endpoint string) ([]option.ClientOption, error) {
		opts := append([]option.ClientOption{option.WithScopes("https://www.googleapis.com/auth/cloud-platform")}, c.ClientOptions...)
		if endpoint != "" {
			opts = append(opts, option.WithEndpoint(endpoint))
		}
		base, _, err := htransport.NewClient(ctx, opts...)
		if err != nil {
			return nil, err
		}
		limited := &http.Client{Transport: limitedTransport{next: base.Transport}}
		svcOpts := []option.ClientOption{option.WithHTTPClient(limited)}
		if endpoint != "" {
			svcOpts = append(svcOpts, option.WithEndpoint(endpoint))
		}
		return svcOpts, nil
	}
	containerOpts, err := client(c.ContainerEndpoint)
	if err != nil {
		return nil, fmt.Errorf("GKE API client: %w", err)
	}
	pubsubOpts, err := client(c.PubSubEndpoint)
	if err != nil {
		return nil, fmt.Errorf("Pub/Sub client: %w", err)
	}
	g := &gcp{}
	if g.container, err = container.NewService(ctx, containerOpts...); err != nil {
		return nil, fmt.Errorf("GKE API client: %w", err)
	}
	if g.pubsub, err = pubsub.NewService(ctx, pubsubOpts...); err != nil {
		return nil, fmt.Errorf("Pub/Sub client: %w", err)
	}
	return g, nil
}

// nodePoolPhase returns a pool's blue-green phase, "" when no blue-green
// upgrade is in progress; gone when the pool does not exist.
func (g *gcp) nodePoolPhase(ctx context.Context, name string) (phase string, gone bool, err error) {
	np, err := g.container.Projects.Locations.Clusters.NodePools.Get(name).Context(ctx).Do()
	var apiErr *googleapi.Error
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
		return "", true, nil
	}
	if err != nil {
		return "", false, err
	}
	if np.UpdateInfo == nil || np.UpdateInfo.BlueGreenInfo == nil {
		return "", false, nil
	}
	return np.UpdateInfo.BlueGreenInfo.Phase, false, nil
}

// upgradingPools returns the watched pools the GKE API reports upgrading:
// RECONCILING covers upgrades in general, and blueGreenInfo is there for
// the whole blue-green upgrade, soak included (when the status may be
// RUNNING again while cordoned blue nodes remain).
func (g *gcp) upgradingPools(ctx context.Context, c *Config) ([]string, error) {
	resp, err := g.container.Projects.Locations.Clusters.NodePools.List(c.clusterPath()).Context(ctx).Do()
	if err != nil {
		return nil, err
	}
	var out []string
	for i, np := range resp.NodePools {
		if i == maxPools {
			break
		}
		if np == nil || !validPoolName(np.Name) || !c.watches(np.Name) {
			continue
		}
		if np.Status == "RECONCILING" || (np.UpdateInfo != nil && np.UpdateInfo.BlueGreenInfo != nil) {
			out = append(out, np.Name)
		}
	}
	return out, nil
}
