module github.com/opensandbox-go/opensandbox

go 1.26.8

require (
	github.com/coder/websocket v1.8.15
	github.com/getkin/kin-openapi v0.153.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/go-openapi/jsonpointer v0.22.5 // indirect
	github.com/go-openapi/swag/jsonname v0.25.5 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
