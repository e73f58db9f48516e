package sandbox

// Languages of the code interpreter (POST /code, POST /code/context).
// Which of them a given execd serves depends on what its image has; see
// docs/execd.md.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
	LanguageBash       = "bash"
)

// Error names of code interpreter error events that do not come from the
// language itself.
const (
	// ErrNameKernelDied: the interpreter process of the context exited
	// during the run; evalue names its exit status. The context is
	// restarted with the same id and its state is lost.
	ErrNameKernelDied = "KernelDied"
	// ErrNameInterrupted: a run of a driver that cannot be interrupted in
	// place (JavaScript) was stopped by restarting the driver.
	ErrNameInterrupted = "Interrupted"
)

// CreateCodeContextRequest is the body of POST /code/context. An empty
// language means python.
type CreateCodeContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd,omitempty"`
}
