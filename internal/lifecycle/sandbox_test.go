package lifecycle

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMergePatch(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	tests := []struct {
		cur   map[string]string
		patch map[string]json.RawMessage
		want  map[string]string
		ok    bool
	}{
		{nil, map[string]json.RawMessage{}, map[string]string{}, true},
		{nil, map[string]json.RawMessage{"a": raw(`"1"`)}, map[string]string{"a": "1"}, true},
		{map[string]string{"a": "1"}, map[string]json.RawMessage{"a": raw(` null `)}, map[string]string{}, true},
		{map[string]string{"a": "1"}, map[string]json.RawMessage{"b": raw(`""`)}, map[string]string{"a": "1", "b": ""}, true},
		{nil, map[string]json.RawMessage{"a": raw(`true`)}, nil, false},
		{nil, map[string]json.RawMessage{"a": raw(`["x"]`)}, nil, false},
	}
	for _, tc := range tests {
		cur := map[string]string{}
		for k, v := range tc.cur {
			cur[k] = v
		}
		got, err := mergePatch(tc.cur, tc.patch)
		if (err == nil) != tc.ok || (tc.ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("mergePatch(%v, %s) = %v, %v; want %v, ok=%v", tc.cur, tc.patch, got, err, tc.want, tc.ok)
		}
		if tc.cur != nil && !reflect.DeepEqual(cur, tc.cur) {
			t.Errorf("mergePatch modified its input: %v, was %v", tc.cur, cur)
		}
	}
}
