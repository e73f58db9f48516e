package sockmark

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/opensandbox-go/opensandbox/internal/testenv"
)

func soMark(c *net.UDPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var mark int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		mark, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK)
	}); err != nil {
		return 0, err
	}
	return mark, gerr
}

func TestMarkControlSetsSOMark(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "setting SO_MARK needs CAP_NET_ADMIN; run as root")
	}
	d := net.Dialer{Control: Control(0x1)}
	c, err := d.Dial("udp", "127.0.0.1:9")
	if err != nil {
		t.Fatalf("Dial with mark: %v", err)
	}
	defer c.Close()
	got, err := soMark(c.(*net.UDPConn))
	if err != nil {
		t.Fatalf("read SO_MARK: %v", err)
	}
	if got != 0x1 {
		t.Fatalf("SO_MARK = %#x; want 0x1", got)
	}
}
