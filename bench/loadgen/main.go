// Command loadgen sends HTTP requests on a fixed schedule (open loop) and prints their latency.
//
// It measures the platform's API for bench/: a load generator written in Node shares the Node
// runtime's own costs (its event loop, its garbage collector, its HTTP client) on a 2-core machine
// and adds them to every latency it reports. Requests leave at their scheduled times whatever the
// responses do, and each latency counts from the scheduled send, so a server that queues cannot
// hide it (no coordinated omission).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

type header []string

func (h *header) String() string     { return strings.Join(*h, ", ") }
func (h *header) Set(v string) error { *h = append(*h, v); return nil }

type summary struct {
	Offered   int     `json:"offered_per_second"`
	Sustained float64 `json:"sustained_per_second"`
	Requests  int     `json:"requests"`
	Failures  int     `json:"failures"`
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	P999      float64 `json:"p99_9_ms"`
	Max       float64 `json:"max_ms"`
	// How late the generator itself sent: the send time minus the scheduled time. It is part of
	// every latency above (which counts from the schedule), so a floor figure can be read apart
	// from the generator's own timer slack and scheduling on a busy machine.
	SendLagP50 float64 `json:"send_lag_p50_ms"`
	SendLagP99 float64 `json:"send_lag_p99_ms"`
	// The generator's own CPU time per request (-1 where unknown): on a 2-core machine every
	// millisecond of it is one the server could not have.
	CpuMsPerRequest float64 `json:"cpu_ms_per_request"`
	ExpectStatus    int     `json:"expect_status"`
	// Whether the generator ran in the real-time class (joinRealtimeClass); it needs CAP_SYS_NICE.
	Realtime bool `json:"realtime"`
}

func main() {
	url := flag.String("url", "", "target URL")
	method := flag.String("method", "POST", "HTTP method")
	body := flag.String("body", "", "request body")
	rate := flag.Int("rate", 1000, "requests per second")
	seconds := flag.Float64("seconds", 10, "how long to send")
	expect := flag.Int("expect", 200, "the status that counts as success")
	connections := flag.Int("connections", 256, "most connections open at once; requests beyond them queue (and their wait counts)")
	// A stream's latency as its caller feels it: when its first event arrives, not when it ends.
	firstByte := flag.Bool("first-byte", false, "count each latency to the response body's first byte instead of to its end")
	var headers header
	flag.Var(&headers, "header", "a request header, name: value (repeatable)")
	// With -trace, each request carries X-Request-Id lg-<scheduled send, Unix microseconds>, which
	// the API echoes and can log, and the file gets one line a request: that id, the send lag and
	// the latency in milliseconds. bench/support/tail.ts lines the two up to show where a slow
	// request's time went.
	trace := flag.String("trace", "", "file to write each request's id, send lag and latency to")
	flag.Parse()

	// One request built once and copied per send. fasthttp's client takes about a third less CPU a
	// request than net/http's (its connection pool hands a connection to the sending goroutine
	// itself, with no reader and writer goroutine per connection), and every bit of the
	// generator's CPU is taken from the two cores the server under test runs on. The pool is
	// bounded, as a gateway's clients keep: an overloaded server then shows as queueing in the
	// latencies rather than as a storm of new connections.
	template := fasthttp.AcquireRequest()
	template.SetRequestURI(*url)
	template.Header.SetMethod(*method)
	for _, h := range headers {
		if name, value, ok := strings.Cut(h, ":"); ok {
			template.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
		}
	}
	template.SetBodyString(*body)
	client := &fasthttp.HostClient{
		Addr:               string(template.Host()),
		MaxConns:           *connections,
		MaxConnWaitTimeout: 60 * time.Second,
		ReadTimeout:        60 * time.Second,
		WriteTimeout:       60 * time.Second,
		StreamResponseBody: *firstByte,
	}
	total := int(float64(*rate) * *seconds)
	interval := time.Duration(float64(time.Second) / float64(*rate))
	latencies := make([]float64, 0, total)
	sendLags := make([]float64, 0, total)
	failures := 0
	var traced []string
	if *trace != "" {
		traced = make([]string, 0, total)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup

	// The schedule runs on its own OS thread, which sleepUntil may block in the kernel.
	runtime.LockOSThread()
	// Threads the runtime starts from here on inherit the class of the one starting them.
	out := summary{Offered: *rate, ExpectStatus: *expect, Realtime: joinRealtimeClass()}
	start := time.Now()
	for i := 0; i < total; i++ {
		due := start.Add(time.Duration(i) * interval)
		sleepUntil(due)
		wg.Add(1)
		go func(due time.Time) {
			defer wg.Done()
			request := fasthttp.AcquireRequest()
			template.CopyTo(request)
			id := ""
			if traced != nil {
				id = fmt.Sprintf("lg-%d", due.UnixMicro())
				request.Header.Set("X-Request-Id", id)
			}
			response := fasthttp.AcquireResponse()
			sendLag := float64(time.Since(due).Microseconds()) / 1000
			err := client.Do(request, response)
			answered := time.Now()
			if err == nil && *firstByte {
				answered, err = readTimingFirstByte(response)
			}
			ok := err == nil && response.StatusCode() == *expect
			fasthttp.ReleaseRequest(request)
			fasthttp.ReleaseResponse(response)
			elapsed := float64(answered.Sub(due).Microseconds()) / 1000
			mu.Lock()
			latencies = append(latencies, elapsed)
			sendLags = append(sendLags, sendLag)
			if traced != nil {
				traced = append(traced, fmt.Sprintf("%s %.3f %.3f", id, sendLag, elapsed))
			}
			if !ok {
				failures++
			}
			mu.Unlock()
		}(due)
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	if traced != nil {
		if err := os.WriteFile(*trace, []byte(strings.Join(traced, "\n")+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}

	sort.Float64s(latencies)
	sort.Float64s(sendLags)
	at := func(values []float64, q float64) float64 { return values[int(q*float64(len(values)-1))] }
	out.Sustained, out.Requests, out.Failures = float64(len(latencies))/wall, len(latencies), failures
	if len(latencies) > 0 {
		out.P50, out.P90, out.P99, out.P999, out.Max = at(latencies, 0.5), at(latencies, 0.9), at(latencies, 0.99), at(latencies, 0.999), latencies[len(latencies)-1]
		out.SendLagP50, out.SendLagP99 = at(sendLags, 0.5), at(sendLags, 0.99)
	}
	if used := cpuMs(); used >= 0 && len(latencies) > 0 {
		out.CpuMsPerRequest = used / float64(len(latencies))
	} else {
		out.CpuMsPerRequest = -1
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

// readTimingFirstByte reads a streamed response body to its end and returns when its first byte
// came. A body fasthttp read whole with the headers (a short one with a length) came with them.
func readTimingFirstByte(response *fasthttp.Response) (time.Time, error) {
	defer response.CloseBodyStream()
	stream := response.BodyStream()
	if stream == nil {
		return time.Now(), nil
	}
	buffer := make([]byte, 4096)
	for {
		n, err := stream.Read(buffer)
		if n > 0 {
			first := time.Now()
			_, err = io.Copy(io.Discard, stream)
			return first, err
		}
		if err == io.EOF {
			return time.Now(), nil
		}
		if err != nil {
			return time.Now(), err
		}
	}
}
