//go:build !unix

package tlsproxy

// alive reports whether an idle origin connection can carry a request; off
// unix only buffered data is checked.
func (uc *upConn) alive() bool { return uc.br.Buffered() == 0 }
