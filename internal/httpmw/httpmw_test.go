package httpmw

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRecover(t *testing.T) {
	var got any
	h := Recover(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") }),
		func(w http.ResponseWriter, r *http.Request, v any) { got = v; w.WriteHeader(http.StatusTeapot) })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got != "boom" || rec.Code != http.StatusTeapot {
		t.Errorf("Recover: report got %v, status %d; want boom, 418", got, rec.Code)
	}
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Errorf("ErrAbortHandler was not re-raised: %v", v)
		}
	}()
	Recover(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) }),
		func(http.ResponseWriter, *http.Request, any) { t.Error("report called for ErrAbortHandler") }).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}

func TestStatusRecorder(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    func(w http.ResponseWriter)
		want int
	}{
		{"explicit", func(w http.ResponseWriter) { w.WriteHeader(404); w.WriteHeader(500) }, 404},
		{"implicit", func(w http.ResponseWriter) { w.Write([]byte("x")) }, 200},
		{"nothing", func(w http.ResponseWriter) {}, 0},
	} {
		rec := &StatusRecorder{ResponseWriter: httptest.NewRecorder()}
		tt.h(rec)
		if rec.Status != tt.want {
			t.Errorf("%s: Status = %d, want %d", tt.name, rec.Status, tt.want)
		}
	}
	var w http.ResponseWriter = &StatusRecorder{ResponseWriter: httptest.NewRecorder()}
	if err := http.NewResponseController(w).Flush(); err != nil {
		t.Errorf("Flush through StatusRecorder: %v", err)
	}
}
