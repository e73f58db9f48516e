package mcpserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Limits that keep file tools from flooding the model.
const (
	// MaxReadBytes is the most file_read returns; a longer file (or range)
	// is cut and reported truncated.
	MaxReadBytes = 1 << 20
	// MaxSearchResults is the most entries file_search returns.
	MaxSearchResults = 1000
)

// Encodings of file_read and file_write.
const (
	encodingUTF8   = "utf-8"
	encodingBase64 = "base64"
)

// normEncoding returns the canonical name of an encoding argument ("" is utf-8).
func normEncoding(e string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(e)) {
	case "", "utf-8", "utf8", "text":
		return encodingUTF8, nil
	case "base64":
		return encodingBase64, nil
	}
	return "", fmt.Errorf("encoding must be utf-8 or base64, not %q", e)
}

// parseRange reads a range_header argument: "bytes=START-END" (inclusive)
// or "bytes=START-". "" means the whole file.
func parseRange(h string) (sandbox.OpenOptions, error) {
	if h == "" {
		return sandbox.OpenOptions{}, nil
	}
	bad := fmt.Errorf("range_header must look like bytes=START-END or bytes=START-, not %q", h)
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok {
		return sandbox.OpenOptions{}, bad
	}
	startS, endS, ok := strings.Cut(spec, "-")
	if !ok || startS == "" {
		return sandbox.OpenOptions{}, bad
	}
	start, err := strconv.ParseInt(startS, 10, 64)
	if err != nil || start < 0 {
		return sandbox.OpenOptions{}, bad
	}
	if endS == "" {
		return sandbox.OpenOptions{Offset: start}, nil
	}
	end, err := strconv.ParseInt(endS, 10, 64)
	if err != nil || end < start {
		return sandbox.OpenOptions{}, bad
	}
	return sandbox.OpenOptions{Offset: start, Length: end - start + 1}, nil
}

// parseMode checks a mode argument: octal digits written as a decimal
// number (755 means rwxr-xr-x), as execd takes it.
func parseMode(arg string, mode int) error {
	if mode < 0 || mode > 7777 {
		return fmt.Errorf("%s must be octal digits like 755, got %d", arg, mode)
	}
	for m := mode; m > 0; m /= 10 {
		if m%10 > 7 {
			return fmt.Errorf("%s must be octal digits like 755, got %d", arg, mode)
		}
	}
	return nil
}

// FileReadIn is the input of file_read.
type FileReadIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	Path             string `json:"path" jsonschema:"absolute path of the file"`
	Encoding         string `json:"encoding,omitempty" jsonschema:"utf-8 (text) or base64 (any bytes)"`
	RangeHeader      string `json:"range_header,omitempty" jsonschema:"part of the file to read: bytes=START-END (inclusive) or bytes=START-"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

var readDefaults = map[string]any{"encoding": encodingUTF8}

// FileReadOut is the reply of file_read.
type FileReadOut struct {
	Path      string `json:"path" jsonschema:"the file read"`
	Content   string `json:"content" jsonschema:"the content, in the requested encoding"`
	Encoding  string `json:"encoding" jsonschema:"utf-8 or base64"`
	Size      int    `json:"size" jsonschema:"bytes returned"`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"the file (or range) is longer than the 1 MiB returned; read the rest with range_header"`
}

func (t *tools) fileRead(ctx context.Context, in FileReadIn) (FileReadOut, error) {
	if in.Path == "" {
		return FileReadOut{}, errMissing("path")
	}
	enc, err := normEncoding(in.Encoding)
	if err != nil {
		return FileReadOut{}, err
	}
	rng, err := parseRange(in.RangeHeader)
	if err != nil {
		return FileReadOut{}, err
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return FileReadOut{}, err
	}
	rc, err := sb.Open(ctx, in.Path, rng)
	if err != nil {
		return FileReadOut{}, fmt.Errorf("read %s in sandbox %s: %w", in.Path, in.SandboxID, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, MaxReadBytes+1))
	if err != nil {
		return FileReadOut{}, fmt.Errorf("read %s in sandbox %s: %w", in.Path, in.SandboxID, err)
	}
	out := FileReadOut{Path: in.Path, Encoding: enc}
	if len(data) > MaxReadBytes {
		data, out.Truncated = data[:MaxReadBytes], true
	}
	switch enc {
	case encodingBase64:
		out.Content = base64.StdEncoding.EncodeToString(data)
	default:
		if out.Truncated {
			data = trimPartialRune(data)
		}
		if !utf8.Valid(data) {
			return FileReadOut{}, fmt.Errorf("%s is not valid UTF-8 text: read it with encoding base64", in.Path)
		}
		out.Content = string(data)
	}
	out.Size = len(data)
	return out, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence a cut left at the end.
func trimPartialRune(b []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if r := b[len(b)-i]; utf8.RuneStart(r) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// FileWriteIn is the input of file_write.
type FileWriteIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	Path             string `json:"path" jsonschema:"absolute path of the file; parent directories are created"`
	Content          string `json:"content" jsonschema:"the new content, in the given encoding"`
	Encoding         string `json:"encoding,omitempty" jsonschema:"utf-8 (text) or base64 (any bytes)"`
	Mode             int    `json:"mode,omitempty" jsonschema:"permissions as octal digits, e.g. 644"`
	Owner            string `json:"owner,omitempty" jsonschema:"owning user name"`
	Group            string `json:"group,omitempty" jsonschema:"owning group name"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

var writeDefaults = map[string]any{"encoding": encodingUTF8, "mode": 755}

// decode checks the arguments and returns the bytes to write.
func (in *FileWriteIn) decode() ([]byte, error) {
	if in.Path == "" {
		return nil, errMissing("path")
	}
	if in.Mode == 0 {
		in.Mode = 755
	}
	if err := parseMode("mode", in.Mode); err != nil {
		return nil, err
	}
	enc, err := normEncoding(in.Encoding)
	if err != nil {
		return nil, err
	}
	if enc == encodingBase64 {
		data, err := base64.StdEncoding.DecodeString(in.Content)
		if err != nil {
			return nil, fmt.Errorf("content is not valid base64: %w", err)
		}
		return data, nil
	}
	return []byte(in.Content), nil
}

// FileWriteOut is the reply of file_write.
type FileWriteOut struct {
	Path         string `json:"path" jsonschema:"the file written"`
	BytesWritten int    `json:"bytes_written" jsonschema:"its size in bytes"`
}

func (t *tools) fileWrite(ctx context.Context, in FileWriteIn) (FileWriteOut, error) {
	data, err := in.decode()
	if err != nil {
		return FileWriteOut{}, err
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return FileWriteOut{}, err
	}
	if err := sb.WriteFile(ctx, in.Path, data, sandbox.WriteOptions{Mode: in.Mode, Owner: in.Owner, Group: in.Group}); err != nil {
		return FileWriteOut{}, fmt.Errorf("write %s in sandbox %s: %w", in.Path, in.SandboxID, err)
	}
	return FileWriteOut{Path: in.Path, BytesWritten: len(data)}, nil
}

// PathsIn is the input of file_delete and file_delete_directories.
type PathsIn struct {
	SandboxID        string   `json:"sandbox_id" jsonschema:"sandbox id"`
	Paths            []string `json:"paths" jsonschema:"absolute paths"`
	ConnectIfMissing bool     `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

func checkPaths(paths []string) error {
	if len(paths) == 0 {
		return errMissing("paths")
	}
	for i, p := range paths {
		if p == "" {
			return fmt.Errorf("paths[%d] is empty", i)
		}
	}
	return nil
}

// PathsOut is the reply of file_delete and file_delete_directories.
type PathsOut struct {
	SandboxID string   `json:"sandbox_id" jsonschema:"sandbox id"`
	Deleted   []string `json:"deleted" jsonschema:"the paths deleted"`
}

func (t *tools) fileDelete(ctx context.Context, in PathsIn) (PathsOut, error) {
	if err := checkPaths(in.Paths); err != nil {
		return PathsOut{}, err
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return PathsOut{}, err
	}
	if err := sb.Remove(ctx, in.Paths...); err != nil {
		return PathsOut{}, fmt.Errorf("delete files in sandbox %s: %w", in.SandboxID, err)
	}
	return PathsOut{SandboxID: in.SandboxID, Deleted: in.Paths}, nil
}

func (t *tools) fileDeleteDirectories(ctx context.Context, in PathsIn) (PathsOut, error) {
	if err := checkPaths(in.Paths); err != nil {
		return PathsOut{}, err
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return PathsOut{}, err
	}
	if err := sb.RemoveDirs(ctx, in.Paths...); err != nil {
		return PathsOut{}, fmt.Errorf("delete directories in sandbox %s: %w", in.SandboxID, err)
	}
	return PathsOut{SandboxID: in.SandboxID, Deleted: in.Paths}, nil
}

// SearchIn is the input of file_search.
type SearchIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	Path             string `json:"path" jsonschema:"directory to search below, at any depth"`
	Pattern          string `json:"pattern" jsonschema:"glob matched against file base names, e.g. *.go"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

// FileEntry describes one file.
type FileEntry struct {
	Path       string    `json:"path" jsonschema:"absolute path"`
	Type       string    `json:"type" jsonschema:"file, directory, symlink or other"`
	Size       int64     `json:"size" jsonschema:"size in bytes"`
	Mode       int       `json:"mode" jsonschema:"permissions as octal digits, e.g. 644"`
	Owner      string    `json:"owner" jsonschema:"owning user"`
	Group      string    `json:"group" jsonschema:"owning group"`
	ModifiedAt time.Time `json:"modified_at" jsonschema:"last modification (RFC 3339)"`
}

// SearchOut is the reply of file_search.
type SearchOut struct {
	Files     []FileEntry `json:"files" jsonschema:"matching files"`
	Truncated bool        `json:"truncated,omitempty" jsonschema:"more files matched than the 1000 returned; narrow the search"`
}

func (t *tools) fileSearch(ctx context.Context, in SearchIn) (SearchOut, error) {
	if in.Path == "" {
		return SearchOut{}, errMissing("path")
	}
	if in.Pattern == "" {
		return SearchOut{}, errMissing("pattern")
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return SearchOut{}, err
	}
	found, err := sb.Search(ctx, in.Path, in.Pattern)
	if err != nil {
		return SearchOut{}, fmt.Errorf("search %s for %q in sandbox %s: %w", in.Path, in.Pattern, in.SandboxID, err)
	}
	out := SearchOut{Files: make([]FileEntry, 0, min(len(found), MaxSearchResults))}
	if len(found) > MaxSearchResults {
		found, out.Truncated = found[:MaxSearchResults], true
	}
	for _, f := range found {
		out.Files = append(out.Files, FileEntry{
			Path: f.Path, Type: f.Type, Size: f.Size, Mode: f.Mode,
			Owner: f.Owner, Group: f.Group, ModifiedAt: f.ModifiedAt,
		})
	}
	return out, nil
}

// DirEntryIn is one directory of file_create_directories.
type DirEntryIn struct {
	Path  string `json:"path" jsonschema:"absolute path; missing parents are created"`
	Mode  int    `json:"mode,omitempty" jsonschema:"permissions as octal digits; default 755"`
	Owner string `json:"owner,omitempty" jsonschema:"owning user name"`
	Group string `json:"group,omitempty" jsonschema:"owning group name"`
}

// CreateDirsIn is the input of file_create_directories.
type CreateDirsIn struct {
	SandboxID        string       `json:"sandbox_id" jsonschema:"sandbox id"`
	Entries          []DirEntryIn `json:"entries" jsonschema:"directories to create"`
	ConnectIfMissing bool         `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

func (in *CreateDirsIn) validate() error {
	if len(in.Entries) == 0 {
		return errMissing("entries")
	}
	for i := range in.Entries {
		e := &in.Entries[i]
		if e.Path == "" {
			return fmt.Errorf("entries[%d].path is required", i)
		}
		if e.Mode == 0 {
			e.Mode = 755
		}
		if err := parseMode(fmt.Sprintf("entries[%d].mode", i), e.Mode); err != nil {
			return err
		}
	}
	return nil
}

// CreateDirsOut is the reply of file_create_directories.
type CreateDirsOut struct {
	SandboxID string   `json:"sandbox_id" jsonschema:"sandbox id"`
	Created   []string `json:"created" jsonschema:"the directories that now exist"`
}

func (t *tools) fileCreateDirectories(ctx context.Context, in CreateDirsIn) (CreateDirsOut, error) {
	if err := in.validate(); err != nil {
		return CreateDirsOut{}, err
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return CreateDirsOut{}, err
	}
	out := CreateDirsOut{SandboxID: in.SandboxID, Created: make([]string, 0, len(in.Entries))}
	for _, e := range in.Entries {
		if err := sb.Mkdir(ctx, e.Path, sandbox.Permission{Mode: e.Mode, Owner: e.Owner, Group: e.Group}); err != nil {
			return CreateDirsOut{}, fmt.Errorf("create directory %s in sandbox %s (created so far: %v): %w", e.Path, in.SandboxID, out.Created, err)
		}
		out.Created = append(out.Created, e.Path)
	}
	return out, nil
}

// MoveEntryIn is one move of file_move.
type MoveEntryIn struct {
	Src  string `json:"src" jsonschema:"current path"`
	Dest string `json:"dest" jsonschema:"new path"`
}

// MoveIn is the input of file_move.
type MoveIn struct {
	SandboxID        string        `json:"sandbox_id" jsonschema:"sandbox id"`
	Entries          []MoveEntryIn `json:"entries" jsonschema:"moves, done in order"`
	ConnectIfMissing bool          `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

// MoveOut is the reply of file_move.
type MoveOut struct {
	SandboxID string        `json:"sandbox_id" jsonschema:"sandbox id"`
	Moved     []MoveEntryIn `json:"moved" jsonschema:"the moves done"`
}

func (t *tools) fileMove(ctx context.Context, in MoveIn) (MoveOut, error) {
	if len(in.Entries) == 0 {
		return MoveOut{}, errMissing("entries")
	}
	items := make([]sandbox.RenameFileItem, 0, len(in.Entries))
	for i, e := range in.Entries {
		if e.Src == "" || e.Dest == "" {
			return MoveOut{}, fmt.Errorf("entries[%d] needs both src and dest", i)
		}
		items = append(items, sandbox.RenameFileItem{Src: e.Src, Dest: e.Dest})
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return MoveOut{}, err
	}
	if err := sb.Move(ctx, items...); err != nil {
		return MoveOut{}, fmt.Errorf("move files in sandbox %s: %w", in.SandboxID, err)
	}
	return MoveOut{SandboxID: in.SandboxID, Moved: in.Entries}, nil
}

// ReplaceEntryIn is one replacement of file_replace_contents.
type ReplaceEntryIn struct {
	Path       string `json:"path" jsonschema:"file to edit"`
	OldContent string `json:"old_content" jsonschema:"text to find (every occurrence is replaced)"`
	NewContent string `json:"new_content" jsonschema:"replacement text"`
}

// ReplaceIn is the input of file_replace_contents.
type ReplaceIn struct {
	SandboxID        string           `json:"sandbox_id" jsonschema:"sandbox id"`
	Entries          []ReplaceEntryIn `json:"entries" jsonschema:"replacements, done in order"`
	ConnectIfMissing bool             `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

// ReplaceResult is the outcome of one replacement.
type ReplaceResult struct {
	Path          string `json:"path" jsonschema:"the file edited"`
	ReplacedCount int    `json:"replaced_count" jsonschema:"occurrences replaced"`
}

// ReplaceOut is the reply of file_replace_contents.
type ReplaceOut struct {
	SandboxID string          `json:"sandbox_id" jsonschema:"sandbox id"`
	Results   []ReplaceResult `json:"results" jsonschema:"one per entry"`
}

func (t *tools) fileReplaceContents(ctx context.Context, in ReplaceIn) (ReplaceOut, error) {
	if len(in.Entries) == 0 {
		return ReplaceOut{}, errMissing("entries")
	}
	for i, e := range in.Entries {
		if e.Path == "" {
			return ReplaceOut{}, fmt.Errorf("entries[%d].path is required", i)
		}
		if e.OldContent == "" {
			return ReplaceOut{}, fmt.Errorf("entries[%d].old_content must not be empty", i)
		}
	}
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return ReplaceOut{}, err
	}
	out := ReplaceOut{SandboxID: in.SandboxID, Results: make([]ReplaceResult, 0, len(in.Entries))}
	for _, e := range in.Entries {
		n, err := sb.Replace(ctx, e.Path, e.OldContent, e.NewContent)
		if err != nil {
			return ReplaceOut{}, fmt.Errorf("replace in %s in sandbox %s (earlier entries done: %v): %w", e.Path, in.SandboxID, out.Results, err)
		}
		out.Results = append(out.Results, ReplaceResult{Path: e.Path, ReplacedCount: n})
	}
	return out, nil
}
