package sidecar

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// defaultGateways returns the IPv4 gateways of the default routes in a
// /proc/net/route table: on a Docker bridge, the host's address, from
// which published ports are proxied to the sidecar.
func defaultGateways(path string) ([]netip.Addr, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		fields := strings.Fields(sc.Text())
		if first || len(fields) < 3 || fields[1] != "00000000" {
			continue
		}
		b, err := hex.DecodeString(fields[2])
		if err != nil || len(b) != 4 {
			return nil, fmt.Errorf("%s: bad gateway %q", path, fields[2])
		}
		// The kernel prints the address in host (little-endian) order.
		a := netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]})
		if !a.IsUnspecified() {
			out = append(out, a)
		}
	}
	return out, sc.Err()
}
