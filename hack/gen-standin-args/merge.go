package main

import (
	"fmt"
	"reflect"
)

// merge folds one program's tables, one per release line (oldest first, the
// generated commit last; nil where the line has no such command), into one
// table: every definition an argument or subcommand has had, each with the
// lines that have it (Since and Until, "" for the oldest and the newest).
// Consecutive lines with the same definition share one entry; an argument
// that changed has one entry per definition, one that went away keeps its
// last. Entries are in the newest line's order, an older line's argument
// after the one it followed there.
func merge(tables []*Command, versions []string) (*Command, error) {
	if len(tables) != len(versions) || len(tables) == 0 {
		return nil, fmt.Errorf("merge: %d tables for %d versions", len(tables), len(versions))
	}
	out, err := mergeCommands(tables, versions)
	if err != nil {
		return nil, err
	}
	if len(out) != 1 || out[0].Since != "" || out[0].Until != "" {
		return nil, fmt.Errorf("the program is not in every release line")
	}
	if len(versions) > 1 {
		out[0].Versions = versions
	}
	return out[0], nil
}

// mergeCommands merges one command (a program or a subcommand, by name)
// over the lines: one entry per run of lines that have it.
func mergeCommands(tables []*Command, versions []string) ([]*Command, error) {
	var out []*Command
	for _, r := range runs(len(tables), func(i int) bool { return tables[i] != nil }, func(i, j int) bool { return true }) {
		cmd, err := mergeRun(tables, versions, r[0], r[1])
		if err != nil {
			return nil, err
		}
		out = append(out, cmd)
	}
	return out, nil
}

// mergeRun merges a command present in lines lo..hi.
func mergeRun(tables []*Command, versions []string, lo, hi int) (*Command, error) {
	newest := tables[hi]
	for i := lo; i < hi; i++ {
		t := tables[i]
		if t.Version != newest.Version || t.SubcommandRequired != newest.SubcommandRequired ||
			t.ArgRequiredElseHelp != newest.ArgRequiredElseHelp || t.ArgsOverrideSelf != newest.ArgsOverrideSelf {
			return nil, fmt.Errorf("%s: the command's settings at %s differ from %s's; the tables cannot say so", newest.Name, versions[i], versions[hi])
		}
	}
	cmd := &Command{Name: newest.Name, Origin: newest.Origin, SubcommandRequired: newest.SubcommandRequired,
		ArgRequiredElseHelp: newest.ArgRequiredElseHelp, Version: newest.Version, ArgsOverrideSelf: newest.ArgsOverrideSelf}
	cmd.Since, cmd.Until = bounds(versions, lo, hi)
	span := tables[lo : hi+1]
	for _, id := range order(span, func(c *Command) []string {
		var ids []string
		for _, a := range c.Args {
			ids = append(ids, a.ID)
		}
		return ids
	}) {
		defs := make([]*Arg, len(tables))
		for i := lo; i <= hi; i++ {
			for _, a := range tables[i].Args {
				if a.ID == id {
					defs[i] = a
				}
			}
		}
		for _, r := range runs(len(defs), func(i int) bool { return defs[i] != nil }, func(i, j int) bool { return sameArg(defs[i], defs[j]) }) {
			a := *defs[r[1]]
			a.Since, a.Until = bounds(versions, r[0], r[1])
			cmd.Args = append(cmd.Args, &a)
		}
	}
	for _, name := range order(span, func(c *Command) []string {
		var names []string
		for _, sc := range c.Subcommands {
			names = append(names, sc.Name)
		}
		return names
	}) {
		subs := make([]*Command, len(tables))
		for i := lo; i <= hi; i++ {
			for _, sc := range tables[i].Subcommands {
				if sc.Name == name {
					subs[i] = sc
				}
			}
		}
		merged, err := mergeCommands(subs, versions)
		if err != nil {
			return nil, err
		}
		cmd.Subcommands = append(cmd.Subcommands, merged...)
	}
	return cmd, nil
}

// bounds are Since and Until of lines lo..hi.
func bounds(versions []string, lo, hi int) (since, until string) {
	if lo > 0 {
		since = versions[lo]
	}
	if hi < len(versions)-1 {
		until = versions[hi]
	}
	return since, until
}

// runs returns the maximal ranges [lo, hi] of indexes where present holds
// and consecutive entries are the same.
func runs(n int, present func(i int) bool, same func(i, j int) bool) [][2]int {
	var out [][2]int
	for i := 0; i < n; i++ {
		if !present(i) {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k][1] == i-1 && same(i-1, i) {
			out[k][1] = i
			continue
		}
		out = append(out, [2]int{i, i})
	}
	return out
}

// order lists the keys of the tables, the newest's first in its order, then
// each older one's (newest to oldest) after the key that precedes it there.
func order(tables []*Command, keys func(*Command) []string) []string {
	var list []string
	index := func(k string) int {
		for i, x := range list {
			if x == k {
				return i
			}
		}
		return -1
	}
	for i := len(tables) - 1; i >= 0; i-- {
		ks := keys(tables[i])
		for j, k := range ks {
			if index(k) >= 0 {
				continue
			}
			at := 0
			if j > 0 {
				at = index(ks[j-1]) + 1
			}
			list = append(list[:at], append([]string{k}, list[at:]...)...)
		}
	}
	return list
}

// sameArg compares two definitions of an argument, not where they are.
func sameArg(a, b *Arg) bool {
	x, y := *a, *b
	x.Origin, y.Origin = "", ""
	return reflect.DeepEqual(x, y)
}
