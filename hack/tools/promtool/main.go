// Command promcheck checks Prometheus alert rules and Grafana dashboards
// with Prometheus' own packages, for `make verify`:
//
//	promcheck rules FILE...  parse and validate rule files as Prometheus
//	                         loads them (promtool check rules)
//	promcheck test FILE...   run unit tests written in promtool's
//	                         `test rules` format, and require of every
//	                         alerting rule a test where it fires and one
//	                         where it does not
//	promcheck refs FILE...   print, as JSON, the metrics and labels each
//	                         expression of rule files (.yaml, .yml) and
//	                         Grafana dashboards (.json) refers to
//	promcheck scrape-eval RULES NAMESPACE POD=URL...
//	                         scrape each /metrics URL 4 times, 5 s apart
//	                         (labels namespace and pod added, as
//	                         Prometheus' Kubernetes discovery does), and
//	                         evaluate every alert of RULES on the series
//	                         after each scrape: an expression that fails on
//	                         real series fails
//
// Not cmd/promtool: it links every service discovery and remote-storage
// client with their cloud SDKs (1 364 packages, several minutes of a cold
// build on 2 cores). The rules package alone pulls them in (through
// notifier and config), so the unit tests run here on the PromQL engine
// (about 310 packages) with the alert state machine of rules.AlertingRule
// ported in alert.go.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		usage()
	}
	var err error
	switch cmd, files := os.Args[1], os.Args[2:]; cmd {
	case "rules":
		err = checkRules(os.Stdout, files)
	case "test":
		err = testRules(os.Stdout, files)
	case "refs":
		err = printRefs(os.Stdout, files)
	case "scrape-eval":
		if len(files) < 3 {
			usage()
		}
		err = scrapeEval(os.Stdout, files[0], files[1], files[2:], 4, 5*time.Second)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: promcheck rules|test|refs FILE... | scrape-eval RULES NAMESPACE POD=URL...")
	os.Exit(2)
}

// logger reports what rulefmt only warns about (a second YAML document).
var logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

// errList joins errors one per line, each prefixed.
func errList(prefix string, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = prefix + e.Error()
	}
	return fmt.Errorf("%s", strings.Join(lines, "\n"))
}

func isDashboard(file string) bool { return strings.EqualFold(filepath.Ext(file), ".json") }
