// Package lines splits process output into the lines execd streams as
// events: one event per line with its terminator ("\n", "\r" or "\r\n")
// removed, an empty line reported as "\n", and a trailing partial line
// reported when the output ends. Very long lines are cut at MaxLine so that a
// process writing without newlines cannot grow execd's memory without bound.
package lines

// MaxLine is the longest line kept whole; longer runs are emitted in pieces.
const MaxLine = 64 << 10

// Splitter turns a byte stream into lines. The zero value is ready to use.
// It is not safe for concurrent use.
type Splitter struct {
	partial []byte
	// skipLF is set after a line ended in '\r' so that a '\n' arriving at
	// the start of the next chunk completes "\r\n" instead of making an
	// empty line.
	skipLF bool
}

// Feed splits p and calls emit for each complete line. The slice passed to
// emit is only valid during the call.
func (s *Splitter) Feed(p []byte, emit func(line []byte)) {
	for len(p) > 0 {
		if s.skipLF {
			s.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := indexTerminator(p)
		if i < 0 {
			s.partial = append(s.partial, p...)
			for len(s.partial) >= MaxLine {
				emit(s.partial[:MaxLine])
				s.partial = append(s.partial[:0], s.partial[MaxLine:]...)
			}
			return
		}
		if len(s.partial) > 0 {
			s.partial = append(s.partial, p[:i]...)
			s.emitLine(s.partial, emit)
			s.partial = s.partial[:0]
		} else {
			s.emitLine(p[:i], emit)
		}
		if p[i] == '\r' {
			if i+1 < len(p) {
				if p[i+1] == '\n' {
					i++
				}
			} else {
				s.skipLF = true
			}
		}
		p = p[i+1:]
	}
}

// Flush emits a pending partial line, if any, and resets the splitter.
func (s *Splitter) Flush(emit func(line []byte)) {
	if len(s.partial) > 0 {
		emit(s.partial)
		s.partial = s.partial[:0]
	}
	s.skipLF = false
}

var newline = []byte("\n")

func (s *Splitter) emitLine(line []byte, emit func([]byte)) {
	if len(line) == 0 {
		emit(newline)
		return
	}
	emit(line)
}

func indexTerminator(p []byte) int {
	for i, c := range p {
		if c == '\n' || c == '\r' {
			return i
		}
	}
	return -1
}
