package main

import (
	"strings"
	"testing"
)

func TestClaimTokenExcludesAccessToken(t *testing.T) {
	_, err := parseFlags([]string{"--access-token", "a", "--claim-token", "b"})
	if err == nil || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("both tokens: err = %v, want them refused together", err)
	}
	t.Setenv("EXECD_CLAIM_TOKEN", "from-env")
	c, err := parseFlags(nil)
	if err != nil || c.claimToken != "from-env" {
		t.Errorf("claim token from the environment = %q, %v", c.claimToken, err)
	}
}
