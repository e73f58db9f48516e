package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

func TestWatchMetrics(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /execd/metrics/watch", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		enc := json.NewEncoder(w)
		for i := 1; ; i++ {
			if err := enc.Encode(Metrics{CPUCount: 1, MemUsedMiB: float64(i), Timestamp: int64(i)}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if i == 3 {
				<-r.Context().Done()
				return
			}
		}
	})
	sb := s.connect(t)
	stop := errors.New("enough")
	var got []float64
	err := sb.WatchMetrics(testCtx(t), func(m Metrics) error {
		got = append(got, m.MemUsedMiB)
		if len(got) == 2 {
			return stop
		}
		return nil
	})
	if err != stop || len(got) != 2 || got[1] != 2 {
		t.Errorf("WatchMetrics = %v with samples %v, want the callback's error after 2", err, got)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	err = sb.WatchMetrics(ctx, func(m Metrics) error {
		if m.Timestamp == 3 {
			cancel()
		}
		return nil
	})
	if err != context.Canceled {
		t.Errorf("WatchMetrics cancelled = %v, want context.Canceled", err)
	}
}
