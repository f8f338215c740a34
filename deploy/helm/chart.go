// Package helm owns Millwright's Helm chart (deploy/helm/millwright: the
// worker Deployment, PodDisruptionBudget, ServiceAccount, least-privilege
// ClusterRole and the CRDs) and renders it with Helm's own Go library, so
// tests and tools see exactly what `helm install` would apply.
package helm

import (
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// chartFiles is the chart directory; "all:" keeps _helpers.tpl and
// .helmignore, which embed skips by default.
//
//go:embed all:millwright
var chartFiles embed.FS

const chartDir = "millwright"

// Chart loads the embedded chart.
func Chart() (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(chartFiles, chartDir, func(name string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() {
			return err
		}
		data, err := chartFiles.ReadFile(name)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(name, chartDir+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded chart: %w", err)
	}
	loaded, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	return loaded, nil
}

// Release names the installation being rendered.
type Release struct {
	Name      string
	Namespace string
}

// Manifest is one rendered template.
type Manifest struct {
	// Template is the template's path in the chart, e.g. "millwright/templates/deployment.yaml".
	Template string
	// YAML may hold several documents separated by "---".
	YAML string
}

// Render renders the chart's templates for release with values merged over
// values.yaml, as `helm template` would (install mode). Templates that render
// to nothing and NOTES.txt are left out. Missing keys are errors (strict
// mode), so a typo in a template does not silently render empty.
func Render(release Release, values map[string]any) ([]Manifest, error) {
	loaded, err := Chart()
	if err != nil {
		return nil, err
	}
	options := chartutil.ReleaseOptions{Name: release.Name, Namespace: release.Namespace, Revision: 1, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(loaded, values, options, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	rendered, err := engine.Engine{Strict: true}.Render(loaded, renderValues)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	var out []Manifest
	for _, name := range slices.Sorted(maps.Keys(rendered)) {
		text := rendered[name]
		if path.Base(name) == "NOTES.txt" || strings.TrimSpace(stripComments(text)) == "" {
			continue
		}
		out = append(out, Manifest{Template: name, YAML: text})
	}
	return out, nil
}

// CRDs returns the chart's crds/ files (installed by Helm before the
// templates, never templated), keyed by file name.
func CRDs() (map[string][]byte, error) {
	loaded, err := Chart()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, crd := range loaded.CRDObjects() {
		out[path.Base(crd.Name)] = crd.File.Data
	}
	return out, nil
}

func stripComments(text string) string {
	var kept []string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}
