package kubetest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Load decodes the YAML documents of the manifest file at path into typed
// objects of the Env's scheme, strictly: an unknown or duplicated field, or
// a kind the scheme lacks, fails the test.
func (e *Env) Load(t testing.TB, path string) []client.Object {
	t.Helper()
	objs, err := DecodeManifests(e.Scheme, path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// DecodeManifests is Load without a test: it decodes every non-empty YAML
// document of the file at path strictly into a typed object of scheme.
func DecodeManifests(scheme *runtime.Scheme, path string) ([]client.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []client.Object
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		cobj, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%s: document %d: %T is not an object with metadata", path, i, obj)
		}
		objs = append(objs, cobj)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s: no objects", path)
	}
	return objs, nil
}

// stripComments drops YAML comment lines, so that a document of comments
// alone counts as empty.
func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}
