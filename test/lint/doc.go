// Package lint holds repository-wide checks that run with the unit tests:
// every package has exactly one doc comment, and the binaries that run
// inside sandboxes keep their dependency rules, generated files are fresh,
// and the Helm chart lints and renders (through tools/helmcheck).
package lint
