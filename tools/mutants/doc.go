// Command mutants checks the reports of a mutation-testing run against the
// project's thresholds.
//
// .ci/mutation runs gremlins (pinned at v0.6.0) once per package and writes
// one JSON report each; this command reads them, takes away the mutants that
// equivalent.txt names as equivalent (a mutated program that behaves like the
// original, so no test can tell them apart), and fails when a package's test
// efficacy or mutator coverage is under its threshold, or when an entry of
// equivalent.txt no longer names a surviving mutant.
//
//	go run ./tools/mutants -equivalent tools/mutants/equivalent.txt fsm=out/fsm.json store=out/store.json
//
// It owns the reading of gremlins' reports and of equivalent.txt. It must not
// run tests or mutate code: gremlins does that.
package main
