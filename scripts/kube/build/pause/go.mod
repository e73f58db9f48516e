// The pod sandbox ("pause") program of the test cluster (scripts/kube/build.sh).
module github.com/opensandbox-go/opensandbox/scripts/kube/build/pause

go 1.26
