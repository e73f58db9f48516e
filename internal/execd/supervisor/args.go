package supervisor

// SplitArgs splits execd's command line (without the program name) at the
// first "--": what comes before are execd's flags, what comes after is the
// user's entrypoint. Without "--", or with nothing after it, entrypoint is nil
// and execd runs unsupervised.
func SplitArgs(args []string) (flags, entrypoint []string) {
	for i, a := range args {
		if a == "--" {
			if i+1 < len(args) {
				entrypoint = args[i+1:]
			}
			return args[:i], entrypoint
		}
	}
	return args, nil
}
