package rfb

import (
	"bytes"
	"testing"
)

func TestVNCAuthKey(t *testing.T) {
	for _, tc := range []struct {
		password string
		want     [8]byte
	}{
		// "password" bit-reversed by hand: 'p' 0x70 = 0111 0000 → 0000 1110 = 0x0e, …
		{"password", [8]byte{0x0e, 0x86, 0xce, 0xce, 0xee, 0xf6, 0x4e, 0x26}},
		{"pass", [8]byte{0x0e, 0x86, 0xce, 0xce}}, // padded with zeros
		{"passwordXYZ", [8]byte{0x0e, 0x86, 0xce, 0xce, 0xee, 0xf6, 0x4e, 0x26}},
		{"\x01\x80\xff", [8]byte{0x80, 0x01, 0xff}},
	} {
		if got := vncAuthKey(tc.password); got != tc.want {
			t.Errorf("vncAuthKey(%q) = % x, want % x", tc.password, got, tc.want)
		}
	}
}

func TestVNCAuthResponse(t *testing.T) {
	challenge := [16]byte{0: 0xde, 1: 0xad, 7: 0x01, 8: 0xbe, 15: 0xef}
	got := vncAuthResponse(challenge, "password")
	if want := vncAuthExpected(challenge, "password"); !bytes.Equal(got[:], want) {
		t.Errorf("vncAuthResponse = % x, want % x", got, want)
	}
	// The two halves are encrypted independently (ECB).
	if bytes.Equal(got[:8], got[8:]) {
		t.Errorf("vncAuthResponse halves are equal for different challenge halves: % x", got)
	}
	if other := vncAuthResponse(challenge, "passwore"); other == got {
		t.Errorf("vncAuthResponse is the same for different passwords")
	}
}
