package app

import (
	"slices"
	"testing"
)

// The supervisor and the server share the container: the server's Go
// memory limit leaves the supervisor's share out, and the last
// --memory-limit (the one added) is the one the server takes.
func TestSupervisedServerLeavesTheSupervisorItsShare(t *testing.T) {
	args := []string{"--supervise", "--memory-limit=268435456"}
	got := childArgs(args, 256<<20)
	if want := append(slices.Clone(args), "--memory-limit=251658240"); !slices.Equal(got, want) {
		t.Errorf("childArgs = %q, want %q", got, want)
	}
	if got := childArgs(args, 0); !slices.Equal(got, args) {
		t.Errorf("without a memory limit: %q, want the supervisor's own arguments", got)
	}
	cmd := NewCommand()
	if err := cmd.ParseFlags(got); err != nil {
		t.Fatal(err)
	}
	if v := cmd.Flags().Lookup("memory-limit"); v == nil || v.Value.String() != "251658240" {
		t.Errorf("the server reads --memory-limit=%v, want the last one", v)
	}
}
