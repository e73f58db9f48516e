package rfb

import (
	"crypto/des"
	"math/bits"
)

// vncAuthResponse answers a VNC Authentication challenge (RFC 6143
// §7.2.2): the 16-byte challenge encrypted with DES in ECB mode, keyed by
// the password. The key is the first eight bytes of the password, padded
// with zero bytes, with the bits of each byte reversed — the RFC does not
// say so, but every VNC implementation has done it since the original
// (its DES code numbered key bits from the other end).
func vncAuthResponse(challenge [16]byte, password string) [16]byte {
	key := vncAuthKey(password)
	block, err := des.NewCipher(key[:])
	if err != nil {
		panic("rfb: des.NewCipher with an 8-byte key: " + err.Error()) // cannot happen
	}
	var out [16]byte
	block.Encrypt(out[0:8], challenge[0:8])
	block.Encrypt(out[8:16], challenge[8:16])
	return out
}

func vncAuthKey(password string) [8]byte {
	var key [8]byte
	copy(key[:], password) // beyond eight bytes is ignored
	for i, b := range key {
		key[i] = bits.Reverse8(b)
	}
	return key
}
