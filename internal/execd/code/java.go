package code

import (
	"context"
	_ "embed"
)

//go:embed Driver.java
var driverJava []byte

// startJava starts a Java context: Driver.java, run by java in source-file
// mode, evaluates cells with the JShell API. JShell's execution engine is
// a second JVM (JShell's default remote engine), whose System.out and
// System.err come back as the cell's stdout and stderr.
func startJava(ctx context.Context, m *Manager, c *codeContext) (runner, error) {
	return startDriver(ctx, m, c, driverSpec{
		lang: langJava, name: "Java driver", file: "Driver.java", source: driverJava,
		prefix: "execd-java-",
		argv: func(bin, script string) []string {
			// -Xshare:auto and a small tiered compile keep start-up short.
			return []string{bin, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", script}
		},
		softStop: true,
	})
}
