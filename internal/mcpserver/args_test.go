package mcpserver

import (
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		in      string
		want    sandbox.OpenOptions
		wantErr bool
	}{
		{"", sandbox.OpenOptions{}, false},
		{"bytes=0-9", sandbox.OpenOptions{Offset: 0, Length: 10}, false},
		{"bytes=100-", sandbox.OpenOptions{Offset: 100}, false},
		{" bytes=5-5", sandbox.OpenOptions{Offset: 5, Length: 1}, false},
		{"bytes=5-1", sandbox.OpenOptions{}, true},
		{"bytes=-10", sandbox.OpenOptions{}, true},
		{"bytes=a-b", sandbox.OpenOptions{}, true},
		{"0-9", sandbox.OpenOptions{}, true},
		{"bytes=1", sandbox.OpenOptions{}, true},
	}
	for _, tt := range tests {
		got, err := parseRange(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseRange(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []int{0, 7, 644, 755, 1777, 7777} {
		if err := parseMode("mode", m); err != nil {
			t.Errorf("parseMode(%d) = %v, want nil", m, err)
		}
	}
	for _, m := range []int{-1, 8, 789, 680, 10000} {
		if err := parseMode("mode", m); err == nil {
			t.Errorf("parseMode(%d) = nil, want an error", m)
		}
	}
}

func TestNormEncoding(t *testing.T) {
	for in, want := range map[string]string{"": "utf-8", "UTF-8": "utf-8", "utf8": "utf-8", "base64": "base64", " Base64 ": "base64"} {
		if got, err := normEncoding(in); err != nil || got != want {
			t.Errorf("normEncoding(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := normEncoding("latin1"); err == nil {
		t.Errorf("normEncoding(latin1) = %q, want an error", got)
	}
}

func TestTrimPartialRune(t *testing.T) {
	tests := []struct{ in, want string }{
		{"abc", "abc"},
		{"ab\xc3\xa9", "ab\xc3\xa9"}, // complete é
		{"ab\xc3", "ab"},             // first byte of é
		{"ab\xe2\x82", "ab"},         // two bytes of €
		{"", ""},
	}
	for _, tt := range tests {
		if got := string(trimPartialRune([]byte(tt.in))); got != tt.want {
			t.Errorf("trimPartialRune(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCreateInValidate(t *testing.T) {
	ok := CreateIn{Image: "busybox"}
	if err := ok.validate(); err != nil {
		t.Fatalf("validate(%+v) = %v", ok, err)
	}
	if ok.TimeoutSeconds != 600 || ok.ReadyTimeoutSeconds != 30 {
		t.Errorf("defaults = timeout %d, ready %d; want 600, 30", ok.TimeoutSeconds, ok.ReadyTimeoutSeconds)
	}
	bad := map[string]CreateIn{
		"no image":        {},
		"user only":       {Image: "x", AuthUsername: "u"},
		"negative":        {Image: "x", TimeoutSeconds: -1},
		"default action":  {Image: "x", NetworkPolicy: &NetworkPolicyIn{DefaultAction: "maybe"}},
		"rule action":     {Image: "x", NetworkPolicy: &NetworkPolicyIn{Egress: []EgressRuleIn{{Action: "permit", Target: "a.com"}}}},
		"rule target":     {Image: "x", NetworkPolicy: &NetworkPolicyIn{Egress: []EgressRuleIn{{Action: "allow"}}}},
		"negative poll":   {Image: "x", HealthCheckPollingIntervalMS: -5},
		"negative ready":  {Image: "x", ReadyTimeoutSeconds: -5},
		"password only":   {Image: "x", AuthPassword: "p"},
		"empty rule both": {Image: "x", NetworkPolicy: &NetworkPolicyIn{Egress: []EgressRuleIn{{}}}},
		"proxy no policy": {Image: "x", CredentialProxy: true},
	}
	for name, in := range bad {
		if err := in.validate(); err == nil {
			t.Errorf("%s: validate(%+v) = nil, want an error", name, in)
		}
	}
}

func TestFileWriteDecode(t *testing.T) {
	in := FileWriteIn{Path: "/a", Content: "aGk=", Encoding: "base64"}
	data, err := in.decode()
	if err != nil || string(data) != "hi" || in.Mode != 755 {
		t.Errorf("decode(base64 aGk=) = %q, %v, mode %d; want \"hi\", nil, 755", data, err, in.Mode)
	}
	for name, in := range map[string]FileWriteIn{
		"no path":     {Content: "x"},
		"bad base64":  {Path: "/a", Content: "!!", Encoding: "base64"},
		"bad mode":    {Path: "/a", Mode: 789},
		"bad charset": {Path: "/a", Encoding: "latin1"},
	} {
		if _, err := in.decode(); err == nil {
			t.Errorf("%s: decode(%+v) = nil error, want one", name, in)
		}
	}
}
