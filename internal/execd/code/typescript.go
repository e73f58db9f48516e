package code

import "context"

// startTypeScript starts a TypeScript context: the JavaScript driver run
// with the typescript module the detector found, which transpiles each
// cell (erasing types, without type checking) before evaluating it in the
// driver's persistent vm context. State persists as in a JavaScript
// context; imports become var bindings, so that a later cell sees them and
// may import again.
func startTypeScript(ctx context.Context, m *Manager, c *codeContext) (runner, error) {
	env, err := m.opts.Env.Environ(nil)
	if err != nil {
		return nil, err
	}
	node, err := m.det.interpreter(langTypeScript, env)
	if err != nil {
		return nil, err
	}
	mod, err := m.det.findTypeScript(node, env)
	if err != nil {
		return nil, err
	}
	return startDriver(ctx, m, c, driverSpec{
		lang: langTypeScript, name: "TypeScript driver", file: "driver.js", source: driverJS,
		prefix: "execd-ts-",
		argv:   func(bin, script string) []string { return []string{bin, script, "typescript", mod} },
	})
}
