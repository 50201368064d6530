package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

type chartInfo struct {
	Name, Version, AppVersion string
	// Registry and Repositories are the default images' (values.yaml).
	Registry     string
	Repositories map[string]string
}

func readChart(dir string) (*chartInfo, error) {
	var meta struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %w", err)
	}
	values, err := readValues(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	c := &chartInfo{Name: meta.Name, Version: meta.Version, AppVersion: meta.AppVersion, Repositories: map[string]string{}}
	if c.Name == "" || c.Version == "" || c.AppVersion == "" {
		return nil, fmt.Errorf("%s/Chart.yaml: name, version and appVersion are required", dir)
	}
	c.Registry, _ = lookup(values, "global.imageRegistry").(string)
	for _, p := range programs {
		if c.Repositories[p], _ = lookup(values, p+".image.repository").(string); c.Repositories[p] == "" {
			return nil, fmt.Errorf("%s/values.yaml has no %s.image.repository", dir, p)
		}
	}
	return c, nil
}

func readValues(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return values, nil
}

// lookup is the value at a dotted path of keys, or nil.
func lookup(values map[string]any, path string) any {
	var v any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// pinValues sets the scalars at dotted key paths of a values file, line by
// line, so that its comments and layout stay as written (they document the
// chart in the package too). Each key must already be there, as a scalar.
func pinValues(text string, pins map[string]string) (string, error) {
	lines := strings.Split(text, "\n")
	for path, value := range pins {
		i, indent, err := findKey(lines, strings.Split(path, "."))
		if err != nil {
			return "", fmt.Errorf("values.yaml: %s: %w", path, err)
		}
		key := path[strings.LastIndex(path, ".")+1:]
		lines[i] = strings.Repeat(" ", indent) + key + ": " + strconv.Quote(value)
	}
	return strings.Join(lines, "\n"), nil
}

// findKey is the line of a key path in a block-style YAML file, and its
// indentation.
func findKey(lines []string, keys []string) (int, int, error) {
	start, end, indent := 0, len(lines), 0
	for n, k := range keys {
		found := -1
		for i := start; i < end; i++ {
			if ind, ok := content(lines[i]); ok && ind == indent && strings.HasPrefix(lines[i][ind:], k+":") {
				found = i
				break
			}
		}
		if found < 0 {
			return 0, 0, fmt.Errorf("no key %q", k)
		}
		if n == len(keys)-1 {
			rest := strings.TrimSpace(lines[found][indent+len(k)+1:])
			if rest == "" || rest == "|" || rest == ">" || strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, "[") {
				return 0, 0, fmt.Errorf("%q is not a one-line scalar", k)
			}
			return found, indent, nil
		}
		// The block under the key: the lines indented deeper, up to the next
		// one that is not.
		start, end = found+1, len(lines)
		child := -1
		for i := start; i < len(lines); i++ {
			ind, ok := content(lines[i])
			if !ok {
				continue
			}
			if ind <= indent {
				end = i
				break
			}
			if child < 0 {
				child = ind
			}
		}
		if child < 0 {
			return 0, 0, fmt.Errorf("%q has no block under it", k)
		}
		indent = child
	}
	panic("unreachable")
}

// content is a line's indentation, unless it is blank or a comment.
func content(line string) (int, bool) {
	t := strings.TrimLeft(line, " ")
	if t == "" || strings.HasPrefix(t, "#") {
		return 0, false
	}
	return len(line) - len(t), true
}

// packageChart packages the chart with pins set in its values into out, with
// Helm (which checks the chart as it packages it), then rewrites the archive
// with every time set to created: Helm stamps the entries with the time it
// runs.
func packageChart(ctx context.Context, helm, chartDir, out string, pins map[string]string, created time.Time) (ChartRelease, error) {
	tmp, err := os.MkdirTemp("", "release-chart-")
	if err != nil {
		return ChartRelease{}, err
	}
	defer os.RemoveAll(tmp)
	copyDir := filepath.Join(tmp, filepath.Base(chartDir))
	if err := os.CopyFS(copyDir, os.DirFS(chartDir)); err != nil {
		return ChartRelease{}, err
	}
	valuesPath := filepath.Join(copyDir, "values.yaml")
	text, err := os.ReadFile(valuesPath)
	if err != nil {
		return ChartRelease{}, err
	}
	pinned, err := pinValues(string(text), pins)
	if err != nil {
		return ChartRelease{}, err
	}
	if err := os.WriteFile(valuesPath, []byte(pinned), 0o644); err != nil {
		return ChartRelease{}, err
	}
	// The pins must read back as set: a line edit of YAML is checked.
	values, err := readValues(valuesPath)
	if err != nil {
		return ChartRelease{}, err
	}
	for path, want := range pins {
		if got := lookup(values, path); got != want {
			return ChartRelease{}, fmt.Errorf("values.yaml: %s is %v after pinning, want %q", path, got, want)
		}
	}
	pkgDir := filepath.Join(tmp, "package")
	cmd := exec.CommandContext(ctx, helm, "package", copyDir, "--destination", pkgDir)
	if b, err := cmd.CombinedOutput(); err != nil {
		return ChartRelease{}, fmt.Errorf("helm package: %w\n%s", err, b)
	}
	pkgs, err := filepath.Glob(filepath.Join(pkgDir, "*.tgz"))
	if err != nil || len(pkgs) != 1 {
		return ChartRelease{}, fmt.Errorf("helm package wrote %v, want one .tgz", pkgs)
	}
	data, err := normalizeTgz(pkgs[0], created)
	if err != nil {
		return ChartRelease{}, err
	}
	file := filepath.Base(pkgs[0])
	if err := os.WriteFile(filepath.Join(out, file), data, 0o644); err != nil {
		return ChartRelease{}, err
	}
	sum := sha256.Sum256(data)
	return ChartRelease{File: file, SHA256: hex.EncodeToString(sum[:])}, nil
}

// normalizeTgz rewrites a chart archive with its entries in their order,
// their times set to mtime and no owner, gzip-compressed without a header
// time.
func normalizeTgz(path string, mtime time.Time) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeDir {
			return nil, fmt.Errorf("%s: unexpected entry %s", path, hdr.Name)
		}
		out := &tar.Header{Typeflag: hdr.Typeflag, Name: hdr.Name, Mode: int64(fs.FileMode(hdr.Mode).Perm()), Size: hdr.Size, ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(out); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
