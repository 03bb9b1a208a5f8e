// Package doctest runs the shell examples of the repository's markdown
// (README.md, docs/*.md, clients/**/*.md) against servers that answer
// errors, and checks that the command each example guards with a lock never
// runs without it. It has no code of its own: see its test.
//
// Every fenced block of shell (```sh, bash, shell, zsh, console) must have,
// on the line before it, one of:
//
//	<!-- doctest: guards ./make-report psql -->   run it; these must not run without the lock
//	<!-- doctest: skip REASON -->                 not run, and why
//
// A runnable example names its server as locks.internal:7379 (in --addr or
// LEASEHOLD_ADDR) or as redis-cli's -h locks.internal -p 7379, or not at all
// (LEASEHOLD_ADDR is set); the test puts its own server's address there. A
// guard ./NAME is made in the example's working directory, a guard NAME
// first on its PATH; each records that it ran. The working directory has
// scripts/ (for `source scripts/leasehold.sh`), and PATH has the leasehold
// binary the test builds.
package doctest
