package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// soOriginalDst is SO_ORIGINAL_DST (IPv4) and IP6T_SO_ORIGINAL_DST (IPv6):
// both are option 80 at their protocol level.
const soOriginalDst = 80

// OriginalDst returns where a connection accepted from a redirect was
// headed before the nat chain rewrote it (the conntrack original tuple).
// A connection that was not redirected returns its own local address.
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("original destination: %T has no file descriptor", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	local, _ := c.LocalAddr().(*net.TCPAddr)
	v6 := local != nil && local.IP.To4() == nil
	var (
		out  netip.AddrPort
		serr error
	)
	cerr := rc.Control(func(fd uintptr) {
		if v6 {
			out, serr = originalDst6(int(fd))
		} else {
			out, serr = originalDst4(int(fd))
		}
	})
	if err := errors.Join(cerr, serr); err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	return out, nil
}

func originalDst4(fd int) (netip.AddrPort, error) {
	var sa unix.RawSockaddrInet4
	size := uint32(unsafe.Sizeof(sa))
	if err := getsockopt(fd, unix.SOL_IP, soOriginalDst, unsafe.Pointer(&sa), &size); err != nil {
		return netip.AddrPort{}, err
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port), nil
}

func originalDst6(fd int) (netip.AddrPort, error) {
	var sa unix.RawSockaddrInet6
	size := uint32(unsafe.Sizeof(sa))
	if err := getsockopt(fd, unix.SOL_IPV6, soOriginalDst, unsafe.Pointer(&sa), &size); err != nil {
		return netip.AddrPort{}, err
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port), nil
}

func getsockopt(fd, level, name int, val unsafe.Pointer, size *uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name),
		uintptr(val), uintptr(unsafe.Pointer(size)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
