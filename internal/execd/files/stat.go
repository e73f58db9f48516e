package files

import (
	"io/fs"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fileInfo builds the wire description of the entry at abs whose Lstat
// result is fi.
func fileInfo(n *names, abs string, fi fs.FileInfo) sandbox.FileInfo {
	st := sysStat(abs, fi)
	return sandbox.FileInfo{
		Path:       abs,
		Type:       fileType(fi.Mode()),
		Size:       fi.Size(),
		ModifiedAt: fi.ModTime().UTC(),
		CreatedAt:  st.created.UTC(),
		Owner:      n.userName(st.uid),
		Group:      n.groupName(st.gid),
		Mode:       modeToWire(fi.Mode()),
	}
}

// fileType names the kind of entry for FileInfo.Type.
func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return sandbox.FileTypeFile
	case m.IsDir():
		return sandbox.FileTypeDirectory
	case m&fs.ModeSymlink != 0:
		return sandbox.FileTypeSymlink
	default:
		return sandbox.FileTypeOther
	}
}
