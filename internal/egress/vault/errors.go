package vault

import "errors"

// Error classes. Store methods wrap one of them with %w; the HTTP handler
// maps them to status codes in one place (statusFor). Messages never contain
// secret values.
var (
	ErrInvalid       = errors.New("invalid credential vault")
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("credential vault already exists")
	ErrConflict      = errors.New("revision conflict")
)
