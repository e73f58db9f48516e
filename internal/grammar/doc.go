// Package grammar is the one definition of the value grammars that the
// API front ends and the runtime drivers share: resource quantities (CPU
// and memory, in Kubernetes' notation), label keys and values (sandbox
// metadata), and instance ids. It knows no transport and no engine, so the
// server validates with the same rules a driver applies, and a second
// runtime inherits them.
//
// Quantities are parsed with k8s.io/apimachinery's resource.Quantity and
// labels checked with its util/validation, restricted to the subset the
// API documents (no exponents, no signs).
//
//	n, err := grammar.ParseMemory("512Mi") // 536870912
//	err = grammar.CheckLabel("team", "ai")
package grammar
