package main

import (
	"reflect"
	"testing"
)

func TestPlanRaisesEachSharedModuleToTheHighestVersion(t *testing.T) {
	lists := map[string]BuildList{
		".": {Versions: map[string]string{
			"google.golang.org/grpc": "v1.85.0",
			"golang.org/x/net":       "v0.61.0",
			"only.main/mod":          "v0.1.0",
		}},
		"hack/tools/kube": {
			Versions: map[string]string{
				"google.golang.org/grpc":     "v1.83.2",
				"golang.org/x/net":           "v0.62.0",
				"google.golang.org/protobuf": "v1.36.12-0.20260120151049-f2248ac996af",
				"k8s.io/api":                 "v0.37.2",
			},
			Replaced: map[string]bool{"k8s.io/api": true},
		},
		"hack/tools/helm": {Versions: map[string]string{
			"google.golang.org/protobuf": "v1.36.12",
			"k8s.io/api":                 "v0.37.10",
		}},
	}
	got := Plan(lists)
	want := []Raise{
		{Dir: ".", Path: "golang.org/x/net", From: "v0.61.0", To: "v0.62.0"},
		{Dir: "hack/tools/kube", Path: "google.golang.org/grpc", From: "v1.83.2", To: "v1.85.0"},
		// A pre-release of v1.36.12 is lower than v1.36.12 (semver, not text order).
		{Dir: "hack/tools/kube", Path: "google.golang.org/protobuf", From: "v1.36.12-0.20260120151049-f2248ac996af", To: "v1.36.12"},
		// v0.37.10 > v0.37.2; pinned by a replace, so run refuses to raise it.
		{Dir: "hack/tools/kube", Path: "k8s.io/api", From: "v0.37.2", To: "v0.37.10", Replace: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Plan:\n got %+v\nwant %+v", got, want)
	}
	lists["."].Versions["golang.org/x/net"] = "v0.62.0"
	if got := Plan(map[string]BuildList{".": lists["."]}); len(got) != 0 {
		t.Fatalf("one module alone needs no raise, got %+v", got)
	}
}
